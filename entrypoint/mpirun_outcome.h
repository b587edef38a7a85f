// What mpirun and the ranks say about how a job ended. mpirun's exit status keeps the first failing rank's
// code (128+N for a signal), and its own messages often say which rank that was:
//   "Process name: [[26584,1],1]" / "Exit code:    3"
//   "mpirun noticed that process rank 1 with PID 0 on node algo-2 exited on signal 9 (Killed)."
//   "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD" / "with errorcode 5."
// Open MPI 4.1 prints the first of these only when the failing process got far enough (a program that
// never calls MPI_Init and fails at once gets no such block), so `train rank-exec` also reports the end of
// the user's command itself, in one line on the rank's error output (rank_end_report below).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train {

// mpirun's exit code when it loses the daemon of another host ("ORTE has lost communication with a remote
// daemon": that host died, or the network to it or its daemon failed) before a rank reported a failure: Open
// MPI's ORTE_ERR_COMM_FAILURE, -51, as an exit status. Not 128 + a signal, though it reads like one.
constexpr int mpirun_lost_daemon_exit_code = 205;

struct RankFailure {
  int rank = -1;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string node;  // as mpirun names it; empty when it did not say

  // The exit code that stands for this failure: the code, or 128+N for signal N.
  int code() const;
};

class MpirunMessages {
 public:
  // Every untagged line mpirun printed, in order.
  void observe(const std::string& line);
  // A rank_end_report line that rank `rank` wrote on its error output (others are ignored). True when
  // the line was such a report.
  bool observe_rank_line(int rank, std::string_view line);

  // The first rank mpirun reported as failed, else the first rank that reported its own failure.
  std::optional<RankFailure> first_failure() const { return failure_ ? failure_ : first_rank_report_; }
  // mpirun's own explanation when it failed before or outside the ranks (the first substantive lines).
  const std::vector<std::string>& own_error_lines() const { return own_lines_; }
  // When mpirun lost another host's daemon, a sentence naming that host (for the report's head, where no
  // length limit cuts it: mpirun's lines after it may be many); empty otherwise.
  const std::string& lost_daemon_sentence() const { return lost_daemon_sentence_; }
  // The host whose daemon mpirun lost ("Remote daemon: ... on node HOST"), empty when it lost none.
  const std::string& lost_daemon_host() const { return lost_daemon_host_; }
  // What mpirun refused in its own command line (an option or policy it does not know, a word it took for
  // the program to run), in words: "mpirun does not know the option \"--bogus\"". Empty when none.
  const std::string& usage_error() const { return usage_error_; }

 private:
  std::optional<RankFailure> failure_;
  std::optional<RankFailure> first_rank_report_;
  std::optional<int> pending_process_rank_;
  std::optional<int> pending_abort_rank_;
  std::vector<std::string> own_lines_;
  std::string pending_usage_;  // a usage message whose subject ("Policy:", "Executable:") comes on a later line
  std::string usage_error_;
  bool daemon_lost_ = false;
  std::string lost_daemon_host_;
  std::string lost_daemon_sentence_;
};

// "[train] rank 1: command `python3` exited with code 3" / "... was killed by signal 9 (SIGKILL)": what
// `train rank-exec` writes when the user's command ends with anything but exit code 0.
std::string rank_end_report(int rank, const std::string& program, int wait_status);

// The failure a rank_end_report line describes; nullopt for any other line.
std::optional<RankFailure> parse_rank_end_report(std::string_view line);

}  // namespace train
