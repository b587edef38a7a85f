// Where the time goes from `train`'s start to the first step, by phase, on every rank: each rank notes the
// end of each phase (seconds since `train` started on its host: job/train_start.h), and after the first
// step rank 0 gathers them and logs one line (docs/metrics.md shows it) with the slowest rank's phases,
// which add up to its time to the first step, and each host's slowest rank. The timeline shows the same
// phases when it records step 1.
#pragma once

#include "runtime/timeline/timeline.h"

#include <mpi.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace train {

// In the order they happen; each ends where the next begins.
enum class StartupPhase {
  launch,        // from train's start on the host to this rank's process: the launcher, mpirun, its daemons
  mpi_init,      // MPI_Init
  job_checks,    // the job description, the device, the allreduce check, the hosts' agreement
  data_index,    // the channels opened and indexed, the shards agreed
  model,         // the model built, its initial weights, a checkpoint resumed
  communicator,  // the reducers' communicator and its warm-up, the reports opened
  first_batch,   // the wait for the first batch
  first_step,    // step 1 and its stop vote
};
inline constexpr size_t startup_phase_count = 8;
const char* startup_phase_name(StartupPhase phase);

// One rank's phase ends, in seconds since the origin.
struct StartupTimes {
  std::array<double, startup_phase_count> ends{};
  double total() const { return ends.back(); }
  double duration(size_t phase) const { return ends[phase] - (phase == 0 ? 0.0 : ends[phase - 1]); }
};

class StartupPhases {
 public:
  // Notes now as this process's start.
  StartupPhases();
  // When train started on this host (seconds since the epoch, job/train_start.h); without one, or with one
  // after this process's start (a clock stepped), the phases count from this process's start.
  void set_origin(std::optional<double> train_started) { origin_ = train_started; }
  // The phase ends now (its first note counts). A phase never noted ends where the one before it did.
  void done(StartupPhase phase);
  bool noted(StartupPhase phase) const { return wall_ends_[static_cast<size_t>(phase)].has_value(); }
  bool counted_from_train_start() const { return origin_ && *origin_ <= process_start_; }
  StartupTimes times() const;
  // The phases as spans of the host's monotonic clock (begin, end), for the timeline.
  std::vector<std::pair<int64_t, int64_t>> monotonic_spans() const;

 private:
  double process_start_ = 0;  // seconds since the epoch
  int64_t process_start_ns_ = 0;
  std::optional<double> origin_;
  std::array<std::optional<double>, startup_phase_count> wall_ends_{};
};

// This rank's phases (one per process: the rank's main and the trainer note into it).
StartupPhases& rank_startup_phases();

// The line rank 0 logs: "startup: first step after T s on the slowest rank (rank R on HOST): launch=... ...
// first_step=...; by host (its slowest rank): HOST=T ...". `hosts` by rank.
std::string format_startup_line(const std::vector<StartupTimes>& times, const std::vector<std::string>& hosts,
                                bool from_train_start);

// The end of the model phase to the start of the communicator's (collective): every rank has built its
// model; the first collective after it (what the step's reductions would otherwise pay, MPI's connections)
// warms the communicator up, and the wait for the slowest rank's model counts here.
void warm_up_communicator(MPI_Comm comm, std::chrono::milliseconds timeout);

// After the first step (collective): every rank's phases to rank 0, which logs the line.
void report_startup_phases(const std::string& host, MPI_Comm comm, std::chrono::milliseconds timeout);
// The phases as spans of `timeline`'s start-up track (shown when it records step 1).
void show_startup_phases(const StartupPhases& phases, timeline::Timeline& timeline);

}  // namespace train
