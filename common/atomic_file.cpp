#include "common/atomic_file.h"

#include "common/environment_error.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <stdexcept>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace train {

namespace {

constexpr std::string_view temporary_suffix = ".tmp-";
// The six characters create_unique_file draws after a prefix.
constexpr std::string_view unique_letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
constexpr size_t unique_length = 6;

std::string directory_of(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}


}  // namespace

int create_new_file(const std::string& path, mode_t mode) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
}

int open_file_for_appending(const std::string& path, mode_t mode) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
}

int create_unique_file(const std::string& prefix, std::string& path, mode_t mode) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    unsigned char random[unique_length];
    if (::getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) return -1;
    path = prefix;
    for (unsigned char byte : random) path += unique_letters[byte % unique_letters.size()];
    const int fd = create_new_file(path, mode);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

AtomicFile::AtomicFile(std::string path, mode_t mode) : path_(std::move(path)) {
  const std::string prefix = path_ + std::string(temporary_suffix);
  fd_ = create_unique_file(prefix, temporary_, mode);
  if (fd_ < 0) throw_file_error("create", prefix + "XXXXXX", errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  if (fd_ < 0) throw std::logic_error(fmt::format("{}: write after commit", path_));
  const char* next = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t written = ::write(fd_, next, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_file_error("write", temporary_, errno);
    }
    next += written;
    size -= static_cast<size_t>(written);
  }
}

void AtomicFile::flush_and_close() {
  if (fd_ < 0) throw std::logic_error(fmt::format("{}: commit twice", path_));
  int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    throw_file_error("flush", temporary_, saved);
  }
  if (::close(fd) != 0) throw_file_error("close", temporary_, errno);
}

void AtomicFile::commit() {
  flush_and_close();
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    throw_file_error("rename", fmt::format("{} to {}", temporary_, path_), errno);
  }
  committed_ = true;
  sync_directory(directory_of(path_));
}

bool AtomicFile::commit_unless_present() {
  flush_and_close();
  // link() fails with EEXIST instead of replacing; the temporary name goes either way (the destructor).
  if (::link(temporary_.c_str(), path_.c_str()) != 0) {
    if (errno == EEXIST) return false;
    throw_file_error("link", fmt::format("{} to {}", temporary_, path_), errno);
  }
  sync_directory(directory_of(path_));
  return true;
}

void write_file_atomically(const std::string& path, std::string_view content) {
  AtomicFile file(path);
  file.write(content);
  file.commit();
}

void make_folders_below(const std::filesystem::path& root, const std::filesystem::path& folder) {
  const std::filesystem::path relative = folder.lexically_relative(root);
  if (relative.empty() || *relative.begin() == "..") {
    throw std::logic_error(fmt::format("make_folders_below: {} is not below {}", folder.string(), root.string()));
  }
  std::error_code ignored;
  std::filesystem::create_directories(root, ignored);  // a failure is said below, for the first folder
  std::filesystem::path path = root;
  for (const auto& part : relative) {
    if (part == ".") continue;
    path /= part;
    if (::mkdir(path.c_str(), 0777) == 0) continue;  // narrowed by the umask, as every folder train makes
    const int made = errno;
    struct stat status {};
    if (::lstat(path.c_str(), &status) != 0) throw_file_error("create", path.string(), made);
    if (S_ISLNK(status.st_mode)) {
      throw std::runtime_error(fmt::format("{} is a symbolic link (to {}), which train does not follow: its outputs "
                                           "stay in the job's folders; replace the link with a folder",
                                           path.string(), std::filesystem::read_symlink(path, ignored).string()));
    }
    if (!S_ISDIR(status.st_mode)) {
      throw std::runtime_error(fmt::format("{} is not a folder; remove it, and train makes the folder", path.string()));
    }
  }
}

void sync_directory(const std::string& directory) {
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_file_error("open the directory", directory, errno);
  int synced = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  // Some file systems (and /proc-like ones) refuse fsync on directories; the rename is still done.
  if (synced != 0 && saved != EINVAL && saved != EROFS) throw_file_error("flush the directory", directory, saved);
}

int remove_stale_temporaries(const std::string& path) {
  std::filesystem::path target(path);
  std::filesystem::path directory = target.parent_path().empty() ? "." : target.parent_path();
  const std::string prefix = target.filename().string() + std::string(temporary_suffix);
  int removed = 0;
  std::error_code error;
  for (std::filesystem::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    // create_unique_file's six letters and digits, nothing more: "model.json.tmp-aB3xYz" but not
    // "model.json.tmp-keep.txt" or "model.json.tmp-a.b-cd": only names this code makes.
    const bool ours = name.size() == prefix.size() + unique_length && name.compare(0, prefix.size(), prefix) == 0 &&
                      name.find_first_not_of(unique_letters, prefix.size()) == std::string::npos;
    if (ours) {
      std::error_code ignored;
      if (std::filesystem::remove(it->path(), ignored)) ++removed;
    }
  }
  return removed;
}

}  // namespace train
