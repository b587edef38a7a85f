// The launcher's share of the time from `train`'s start to the first step, on this host: each phase's end
// noted as it comes, and one log line when the ranks are up (docs/metrics.md shows it). The ranks log the
// rest (runtime/startup_phases.h). A phase this host does not go through (registration outside AWS Batch,
// the probes on one host) takes no time.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>

namespace train {

enum class LaunchPhase {
  sshd,          // this host's sshd answering (multi-host jobs)
  registration,  // AWS Batch: every child node registered with the main node; elsewhere, the host names resolved
  sshd_probes,   // the master: every other host's sshd answering
  mpirun_start,  // mpirun started
  ranks_up,      // mpirun's daemons on every host and the ranks: the first rank says it has started
};
inline constexpr size_t launch_phase_count = 5;

struct LaunchTimes {
  std::array<double, launch_phase_count> ends{};  // seconds since train started on this host
};

// "launcher: ranks up R s after train started on HOST: sshd=... registration=... sshd_probes=...
// mpirun_start=... ranks_up=..." (each phase's own seconds: they add up to R).
std::string format_launch_line(const LaunchTimes& times, const std::string& host);

// This process's phases (the launcher's): noted once each, counted from TRAIN_STARTED_AT
// (job/train_start.h, noted when the launcher started).
void note_launch_phase(LaunchPhase phase);
// Once, when the ranks are up (the ranks_up phase noted): the line into the log.
void log_launch_phases(const std::string& host);

}  // namespace train
