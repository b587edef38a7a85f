#include "log.h"

#include <cerrno>
#include <unistd.h>

namespace train {

void write_line(int fd, std::string_view line) {
  std::string buffer;
  buffer.reserve(line.size() + 1);
  buffer.append(line);
  buffer.push_back('\n');
  const char* data = buffer.data();
  size_t left = buffer.size();
  while (left > 0) {
    ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      return;  // Nowhere left to report a failing log stream.
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
}

}  // namespace train
