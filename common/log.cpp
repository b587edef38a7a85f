#include "common/log.h"

#include "common/atomic_file.h"

#include <cerrno>
#include <mutex>
#include <poll.h>
#include <unistd.h>

namespace train {

namespace {

std::mutex fallback_mutex;
std::filesystem::path fallback_file;  // empty: none set
bool redirected[3] = {false, false, false};

const char* stream_name(int fd) { return fd == STDOUT_FILENO ? "stdout" : "stderr"; }

// Sends `fd` (1 or 2) to the fallback file. True when the stream now goes there (also when another thread
// redirected it first).
bool redirect_to_fallback(int fd) {
  std::lock_guard<std::mutex> lock(fallback_mutex);
  if (redirected[fd]) return true;
  if (fallback_file.empty()) return false;
  std::error_code ignored;
  std::filesystem::create_directories(fallback_file.parent_path(), ignored);
  const int file = open_file_for_appending(fallback_file.string());
  if (file < 0) return false;
  const bool moved = ::dup2(file, fd) >= 0;
  ::close(file);
  if (!moved) return false;
  redirected[fd] = true;
  const std::string note = std::string("[train] ") + stream_name(fd) +
                           " is a broken pipe (its reader went away); its lines continue in " +
                           fallback_file.string() + "\n";
  write_fully(fd, note);
  const int other = fd == STDOUT_FILENO ? STDERR_FILENO : STDOUT_FILENO;
  if (!redirected[other]) write_fully(other, note);
  return true;
}

// A pipe whose reader has gone: poll reports an error on its write end.
bool is_broken_pipe(int fd) {
  pollfd descriptor{fd, POLLOUT, 0};
  return ::poll(&descriptor, 1, 0) == 1 && (descriptor.revents & POLLERR) != 0;
}

}  // namespace

bool write_fully(int fd, std::string_view data) {
  const char* next = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t written = ::write(fd, next, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    next += written;
    left -= static_cast<size_t>(written);
  }
  return true;
}

void write_line(int fd, std::string_view line) {
  std::string buffer;
  buffer.reserve(line.size() + 1);
  buffer.append(line);
  buffer.push_back('\n');
  if (write_fully(fd, buffer)) return;
  // (A short write before the error leaves part of the line in the pipe nobody reads any more.)
  if (errno == EPIPE && (fd == STDOUT_FILENO || fd == STDERR_FILENO) && redirect_to_fallback(fd)) {
    write_fully(fd, buffer);
  }
}

void set_log_fallback(const std::filesystem::path& file) {
  {
    std::lock_guard<std::mutex> lock(fallback_mutex);
    fallback_file = file;
  }
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    if (is_broken_pipe(fd)) redirect_to_fallback(fd);
  }
}

}  // namespace train
