// Whole-line logging. SageMaker reads metrics and errors with regexes over stdout and stderr, so every
// line leaves in a single write(): lines from concurrent writers never interleave mid-line.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace train {

// Writes all of `data` to `fd`, continuing after short writes and EINTR. False (errno set) on an error.
bool write_fully(int fd, std::string_view data);

// Writes `line` plus a newline to `fd` in one write() (retrying only the unwritten tail on a short write).
void write_line(int fd, std::string_view line);

// "[train] ..." on stderr: the launcher's own voice, distinct from relayed rank output.
template <typename... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) {
  write_line(2, "[train] " + fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
void log_error(fmt::format_string<Args...> format, Args&&... args) {
  write_line(2, "[train] error: " + fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace train
