#include "entrypoint/program_exec.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fcntl.h>
#include <paths.h>
#include <string>
#include <unistd.h>

namespace train {

namespace {

// What glibc's execvpe searches when PATH is unset (confstr(_CS_PATH)).
constexpr const char* default_search_path = "/bin:/usr/bin";

// The control characters dash lets through on a script's first line, beside the white space.
bool harmless_control(unsigned char byte) {
  return byte == '\t' || byte == '\n' || byte == '\v' || byte == '\f' || byte == '\r' || byte == 0x0E ||
         byte == 0x0F || byte == 0x1B;
}

}  // namespace

bool set_default_path_if_missing() {
  const char* path = std::getenv("PATH");
  if (path != nullptr && *path != '\0') return false;
  return ::setenv("PATH", std::string(default_search_path_variable).c_str(), 1) == 0;
}

bool can_be_shell_script(std::string_view first_bytes) {
  first_bytes = first_bytes.substr(0, shell_script_sample_bytes);
  if (first_bytes.substr(0, 2) == "#!") return false;
  for (unsigned char byte : first_bytes) {
    if (byte == '\n') return true;
    if ((byte < 0x20 || byte == 0x7F) && !harmless_control(byte)) return false;
  }
  return true;
}

ProgramExec::ProgramExec(const std::vector<std::string>& argv) : argv_(argv) {
  const std::string& file = argv_.empty() ? std::string() : argv_.front();
  if (file.empty()) {
    refusal_ = ENOENT;
  } else if (file.find('/') != std::string::npos) {
    candidates_.push_back(file);
  } else if (file.size() >= NAME_MAX) {
    refusal_ = ENAMETOOLONG;
  } else {
    const char* path = std::getenv("PATH");
    std::string_view search = path != nullptr ? path : default_search_path;
    while (true) {
      const size_t colon = search.find(':');
      const std::string_view entry = search.substr(0, colon);
      if (entry.size() < PATH_MAX) candidates_.push_back(entry.empty() ? file : std::string(entry) + "/" + file);
      if (colon == std::string_view::npos) break;
      search.remove_prefix(colon + 1);
    }
  }
  for (auto& argument : argv_) arguments_.push_back(argument.data());
  arguments_.push_back(nullptr);
  shell_arguments_ = {const_cast<char*>(_PATH_BSHELL), nullptr};
  for (size_t i = 1; i < argv_.size(); ++i) shell_arguments_.push_back(argv_[i].data());
  shell_arguments_.push_back(nullptr);
}

int ProgramExec::exec_one(const std::string& path, char* const envp[]) {
  ::execve(path.c_str(), arguments_.data(), envp);
  if (errno != ENOEXEC) return errno;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return ENOEXEC;
  char sample[shell_script_sample_bytes];
  ssize_t got;
  do {
    got = ::read(fd, sample, sizeof sample);
  } while (got < 0 && errno == EINTR);
  ::close(fd);
  if (got < 0 || !can_be_shell_script(std::string_view(sample, static_cast<size_t>(got)))) return ENOEXEC;
  shell_arguments_[1] = const_cast<char*>(path.c_str());
  ::execve(_PATH_BSHELL, shell_arguments_.data(), envp);
  return errno;
}

int ProgramExec::exec(char* const envp[]) {
  if (refusal_ != 0) return refusal_;
  bool not_permitted = false;
  int error = ENOENT;
  for (const auto& candidate : candidates_) {
    error = exec_one(candidate, envp);
    switch (error) {
      case EACCES:
        not_permitted = true;
        break;
      case ENOENT:
      case ESTALE:
      case ENOTDIR:
      case ENODEV:
      case ETIMEDOUT:
        break;  // not here: the next folder of PATH
      default:
        return error;  // found, and it cannot run (ENOEXEC among them): no further search, as execvpe
    }
  }
  return not_permitted ? EACCES : error;
}

}  // namespace train
