// What mpirun says about how a job ended. mpirun's exit status keeps the first failing rank's code
// (128+N for a signal), and its own messages say which rank that was:
//   "Process name: [[26584,1],1]" / "Exit code:    3"
//   "mpirun noticed that process rank 1 with PID 0 on node algo-2 exited on signal 9 (Killed)."
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace train {

struct RankFailure {
  int rank = -1;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string node;  // as mpirun names it; empty when it did not say
};

class MpirunMessages {
 public:
  // Every untagged line mpirun printed, in order.
  void observe(const std::string& line);

  // The first rank mpirun reported as failed, if any.
  const std::optional<RankFailure>& first_failure() const { return failure_; }
  // mpirun's own explanation when it failed before or outside the ranks (the first substantive lines).
  const std::vector<std::string>& own_error_lines() const { return own_lines_; }

 private:
  std::optional<RankFailure> failure_;
  std::optional<int> pending_process_rank_;
  std::vector<std::string> own_lines_;
};

}  // namespace train
