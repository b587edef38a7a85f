#include "common/log.h"

#include <cerrno>
#include <unistd.h>

namespace train {

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
  write_fully(fd, buffer);  // a failing log stream has nowhere left to report to
}

}  // namespace train
