#include "common/regular_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace train {

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::string RegularFile::problem() const {
  if (ok()) return {};
  if (not_regular != nullptr) return fmt::format("not a regular file but {}", not_regular);
  return fmt::format("cannot open: {}", std::strerror(error));
}

RegularFile open_regular_file(const std::string& path) {
  RegularFile file;
  // O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  struct stat status {};
  if (fd < 0) {
    file.error = errno;
    // A socket cannot be opened at all (ENXIO): say what it is rather than the errno's words.
    if (::stat(path.c_str(), &status) == 0 && !S_ISREG(status.st_mode)) {
      file.not_regular = file_type_name(status.st_mode);
    }
    return file;
  }
  if (::fstat(fd, &status) != 0) {
    file.error = errno;
    ::close(fd);
    return file;
  }
  if (!S_ISREG(status.st_mode)) {
    file.not_regular = file_type_name(status.st_mode);
    ::close(fd);
    return file;
  }
  // Reads of a regular file do not heed O_NONBLOCK, but a file system in user space may be told of it. It is
  // the only status flag the file was opened with (O_CLOEXEC is a descriptor flag), so one call clears it.
  ::fcntl(fd, F_SETFL, 0);
  file.fd = fd;
  file.size = static_cast<uint64_t>(status.st_size);
  return file;
}

}  // namespace train
