// Per-rank timing at every log line: each rank's wall time per step, the time it waited for its next batch
// (data wait) and for the other ranks (reduction wait: the engine's wait for the gradients, as it reports
// it, and the trainer's per-step collectives, the stop vote), gathered on rank 0, which names the slowest and fastest rank of each and warns about a straggler.
//
// In data-parallel training every step ends when the slowest rank's gradients arrive, so all ranks show
// about the same step time; what tells the slow rank apart is how much of its step it spent on its own
// work. A rank's own time is its step time less its reduction wait (the rest of the step: its compute and
// its data wait); the others wait for it in their reduction. A rank whose own time exceeds the median
// rank's by a set factor for a set number of log intervals in a row is a straggler.
#pragma once

#include "common/environment_map.h"

#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

namespace train {

// Seconds per step over one log interval, on one rank.
struct RankTimes {
  double step = 0;
  double data_wait = 0;
  double reduction_wait = 0;
  double own() const { return step - reduction_wait; }
};

// The straggler rule: TRAIN_STRAGGLER_FACTOR (default 1.5) and TRAIN_STRAGGLER_INTERVALS (default 3).
struct StragglerRule {
  double factor = 1.5;
  int intervals = 3;
};
// Throws ConfigError naming a malformed variable.
StragglerRule straggler_rule_from_environment(const EnvironmentMap& environment);

// Every rank's host name, on rank 0 (collective; bounded by `timeout`).
std::vector<std::string> gather_host_names(const std::string& host, MPI_Comm comm, std::chrono::milliseconds timeout);
// Every rank's times, on rank 0 (collective; bounded by `timeout`); empty elsewhere.
std::vector<RankTimes> gather_rank_times(const RankTimes& mine, MPI_Comm comm, std::chrono::milliseconds timeout);

// The timing line for rank 0's log (docs/metrics.md shows it):
// "timing step=S step_time max=A (rank R on HOST) min=B (rank R on HOST) data_wait max=... reduction_wait max=..."
std::string format_timing_line(int64_t step, const std::vector<RankTimes>& times, const std::vector<std::string>& hosts);

// Counts, per rank, the log intervals in a row its own time has exceeded the median's by the factor, and
// returns the warning lines due now: when a streak reaches the rule's length, and each time it doubles.
class StragglerWatch {
 public:
  explicit StragglerWatch(StragglerRule rule) : rule_(rule) {}
  std::vector<std::string> observe(const std::vector<RankTimes>& times, const std::vector<std::string>& hosts);

 private:
  StragglerRule rule_;
  std::vector<int> streaks_;
};

}  // namespace train
