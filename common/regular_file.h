// Opening a file that must be a regular one (a config file, a checkpoint, an image, a record file) so that
// whatever else stands in its place is refused before a byte is read: a FIFO (opened without blocking, so a
// FIFO without a writer does not hold the open, nor one whose writer never writes the first read), a device
// (/dev/zero never ends: reading it whole ends in the out-of-memory killer), a socket or a directory.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace train {

// What a file of `mode` is, for messages: "a FIFO (named pipe)", "a directory", "a device", "a socket", ...
const char* file_type_name(mode_t mode);

struct RegularFile {
  int fd = -1;                        // open for reading, close-on-exec, blocking; -1 when refused
  uint64_t size = 0;                  // the file's size when it was opened
  int error = 0;                      // errno when it could not be opened (or checked)
  const char* not_regular = nullptr;  // what stands in the file's place when it is not a regular file

  bool ok() const { return fd >= 0; }
  // Why it was refused: "cannot open: No such file or directory", "not a regular file but a FIFO (named
  // pipe)". Empty when ok().
  std::string problem() const;
};

// Opens `path` for reading when it is a regular file (following symbolic links). The caller closes fd.
RegularFile open_regular_file(const std::string& path);

}  // namespace train
