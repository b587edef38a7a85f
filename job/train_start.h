// When `train` started on this host: the origin of the start-up phases that every host logs (the launcher's
// own and each rank's, runtime/startup_phases.h). The launcher notes it in its environment
// (TRAIN_STARTED_AT, seconds since the epoch), which its ranks inherit on its host; mpirun forwards the
// master's to every host, so a worker's launcher also leaves its own in this host's /dev/shm, where the
// ranks of a worker host read it. A rank started without either (by hand, by another mpirun) counts from
// its own start.
#pragma once

#include "common/environment_map.h"

#include <filesystem>
#include <optional>

namespace train {

constexpr const char* train_started_variable = "TRAIN_STARTED_AT";
inline const std::filesystem::path default_train_start_file = "/dev/shm/train-started-at";

// Seconds since the epoch, now (the hosts' clocks are synchronised; the monotonic clock is per host).
double wall_clock_seconds();

// The launcher, first thing: TRAIN_STARTED_AT=now in this process's environment; returns now.
double note_train_start();
// A worker host's launcher: `started` into `file` for the ranks mpirun starts here (best effort: without
// /dev/shm the ranks count from the master's start).
void leave_train_start_for_ranks(double started, const std::filesystem::path& file = default_train_start_file);

// A rank's origin: the file's when `on_worker_host` and it holds one, else TRAIN_STARTED_AT; nullopt
// without either (or with one that is not a number).
std::optional<double> train_start_of_this_host(const EnvironmentMap& environment, bool on_worker_host,
                                               const std::filesystem::path& file = default_train_start_file);

}  // namespace train
