// Whole-line logging. SageMaker reads metrics and errors with regexes over stdout and stderr, so every
// line leaves in a single write(): lines from concurrent writers never interleave mid-line.
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace train {

// Writes all of `data` to `fd`, continuing after short writes and EINTR. False (errno set) on an error.
bool write_fully(int fd, std::string_view data);

// Writes `line` plus a newline to `fd` in one write() (retrying only the unwritten tail on a short write).
// When stdout or stderr is a broken pipe (its reader went away: `train | head`, a log collector that died)
// and a fallback file is set, that stream continues in the file (below); otherwise the line is dropped: a
// failing log stream has nowhere left to report to, and it must not end the job.
void write_line(int fd, std::string_view line);

// Where stdout and stderr continue when they turn out to be broken pipes: `file` is appended to (created with
// the umask, with its folder), the stream is redirected there for good (so children started afterwards write
// there too), and a line on the other stream, and in the file, says so. Checks both streams at once, so a pipe
// already broken at start is redirected before any child inherits it. SIGPIPE must be ignored for this.
void set_log_fallback(const std::filesystem::path& file);

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
