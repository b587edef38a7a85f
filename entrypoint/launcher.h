// The master's job on one host: start mpirun, relay its ranks' output line by line, pass a stop request on
// to the ranks, reap everything, and report the outcome in SageMaker's files and our exit code.
#pragma once

#include "common/environment_map.h"
#include "entrypoint/signal_inbox.h"
#include "job/job_description.h"

#include <chrono>
#include <set>
#include <sys/types.h>
#include <string>
#include <vector>

namespace train {

struct LaunchSettings {
  std::vector<std::string> rank_program;  // what each rank runs (train's rank mode or rank-exec + a user command)
  std::string mpirun = "mpirun";
  // After SIGTERM, how long ranks get to checkpoint and exit before mpirun is told to kill them. SageMaker
  // sends SIGKILL 120 s after SIGTERM; the default (common/train_variables.cpp) leaves room for the rest of
  // the shutdown.
  std::chrono::seconds stop_grace{};
  // How long the ranks may take to start once mpirun runs (TRAIN_RANKS_TIMEOUT_SECONDS): mpirun that runs out
  // of descriptors, or waits for a daemon that never comes, would otherwise keep the job waiting for ever.
  std::chrono::seconds ranks_timeout{};
  // Multi-host jobs: the host file mpirun reads (one line per host, one slot per rank); empty for one host.
  std::string hostfile;
};

// Reads TRAIN_MPIRUN, TRAIN_STOP_GRACE_SECONDS and TRAIN_RANKS_TIMEOUT_SECONDS. Throws ConfigError on a
// malformed value.
LaunchSettings launch_settings_from_environment(const EnvironmentMap& environment,
                                                std::vector<std::string> rank_program);

// Children of the launcher's process that are not the job's and outlive mpirun (a multi-host master's
// sshd). The launcher reaps every child, so it tells their owner when one of them exits.
class LauncherCompanions {
 public:
  virtual ~LauncherCompanions() = default;
  // The processes the launcher's final sweep must leave running.
  virtual std::set<pid_t> pids() const = 0;
  // Child `pid`, not mpirun, was reaped with wait status `status`.
  virtual void exited(pid_t pid, int status) = 0;
  // One sentence when the companions may have failed the job (an sshd that died for good), else empty.
  virtual std::string trouble() const = 0;
};

// Runs the job; returns the exit code for `train` (docs/faults.md). A multi-host master passes the
// signal inbox it already reads, and its companions.
int run_launcher(const JobDescription& job, const LaunchSettings& settings, const EnvironmentMap& environment,
                 SignalInbox* inbox = nullptr, LauncherCompanions* companions = nullptr);

}  // namespace train
