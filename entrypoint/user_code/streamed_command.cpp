#include "entrypoint/user_code/streamed_command.h"

#include "entrypoint/child_process.h"

#include <cerrno>
#include <csignal>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace train::user_code {

namespace {

using clock = std::chrono::steady_clock;

// After SIGTERM, how long the group gets before SIGKILL.
constexpr auto kill_after = std::chrono::seconds(5);
// After the command has exited, how long what it started may keep its output open.
constexpr auto drain_limit = std::chrono::seconds(2);
// A longer line is passed on in pieces of this size rather than held without bound.
constexpr size_t max_line_bytes = 64 * 1024;

class LineSplitter {
 public:
  template <typename Emit>
  void feed(std::string_view bytes, Emit&& emit) {
    for (char c : bytes) {
      if (c == '\n') {
        emit_line(emit);
        continue;
      }
      partial_ += c;
      if (partial_.size() >= max_line_bytes) emit_line(emit);
    }
  }
  template <typename Emit>
  void finish(Emit&& emit) {
    if (!partial_.empty()) emit_line(emit);
  }

 private:
  template <typename Emit>
  void emit_line(Emit& emit) {
    if (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
    emit(std::string_view(partial_));
    partial_.clear();
  }
  std::string partial_;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Reads what is there now; closes the descriptor at its end.
template <typename Emit>
void read_available(int& fd, LineSplitter& lines, Emit&& emit) {
  char buffer[65536];
  while (fd >= 0) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got > 0) {
      lines.feed(std::string_view(buffer, static_cast<size_t>(got)), emit);
    } else if (got < 0 && errno == EINTR) {
      continue;
    } else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      close_fd(fd);
    }
  }
}

}  // namespace

StreamedOutcome run_streamed(const StreamedCommand& command) {
  SpawnOptions options;
  options.capture_output = true;
  options.new_process_group = true;
  options.die_with_parent = true;
  options.working_directory = command.working_directory;
  ChildProcess child = spawn_child(command.argv, command.environment, options);
  const pid_t group = child.pid;

  LineSplitter out_lines;
  LineSplitter err_lines;
  auto emit_out = [&](std::string_view line) {
    if (command.on_line) command.on_line(false, line);
  };
  auto emit_err = [&](std::string_view line) {
    if (command.on_line) command.on_line(true, line);
  };

  StreamedOutcome outcome;
  std::optional<int> status;
  std::optional<clock::time_point> kill_at;
  std::optional<clock::time_point> drain_until;
  const auto deadline = clock::now() + command.timeout;
  while (true) {
    if (!status) {
      int wait_status = 0;
      pid_t reaped;
      do {
        reaped = ::waitpid(child.pid, &wait_status, WNOHANG);
      } while (reaped < 0 && errno == EINTR);
      if (reaped == child.pid) status = wait_status;
    }
    const auto now = clock::now();
    if (status) {
      if (child.stdout_fd < 0 && child.stderr_fd < 0) break;
      if (!drain_until) drain_until = now + drain_limit;
      if (now > *drain_until) break;
    } else if (!kill_at) {
      std::optional<int> stop = command.stop_signal ? command.stop_signal() : std::nullopt;
      if (stop || now >= deadline) {
        if (stop) outcome.stopped_by = stop;
        outcome.timed_out = !stop;
        ::kill(-group, SIGTERM);
        kill_at = now + kill_after;
      }
    } else if (now >= *kill_at) {
      ::kill(-group, SIGKILL);
    }
    pollfd fds[2] = {{child.stdout_fd, POLLIN, 0}, {child.stderr_fd, POLLIN, 0}};
    if (::poll(fds, 2, 100) < 0 && errno != EINTR) break;
    read_available(child.stdout_fd, out_lines, emit_out);
    read_available(child.stderr_fd, err_lines, emit_err);
  }
  close_fd(child.stdout_fd);
  close_fd(child.stderr_fd);
  out_lines.finish(emit_out);
  err_lines.finish(emit_err);
  // Whatever of its group is left (a process that kept its output open, or the command itself when the poll
  // failed) goes now, and the command is reaped.
  ::kill(-group, SIGKILL);
  if (!status) {
    int wait_status = 0;
    while (::waitpid(child.pid, &wait_status, 0) < 0 && errno == EINTR) {
    }
    status = wait_status;
  }
  outcome.wait_status = *status;
  return outcome;
}

}  // namespace train::user_code
