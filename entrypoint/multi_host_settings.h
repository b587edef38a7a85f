// The waits of a multi-host job, each with a documented default and an environment variable to change
// it (docs/environment.md). The defaults are written once, in common/train_variables.cpp; they are
// generous: a slow start is better than a lost job, and every wait logs a line while it waits, so a slow
// one is visible.
#pragma once

#include "common/environment_map.h"

#include <chrono>
#include <string>

namespace train {

struct MultiHostSettings {
  // How long a host name may take to resolve (SageMaker: names may resolve only after a while).
  std::chrono::seconds resolve_timeout{};
  // How long the master waits for every other host's sshd to answer.
  std::chrono::seconds peers_timeout{};
  // How long a worker waits for the master's sshd to answer, and then for its ranks to appear.
  std::chrono::seconds ranks_timeout{};
  // How long the master may be unreachable before a worker gives up on it.
  std::chrono::seconds master_lost_timeout{};
  // How long a host outside the training instance groups waits for the job's end (the master no longer
  // answering; by default SageMaker's longest MaxRuntimeInSeconds, 28 days).
  std::chrono::seconds idle_timeout{};
  // How long the master keeps answering after its ranks have finished, so that workers can tell a finished
  // job from a lost master.
  std::chrono::seconds master_linger{};
  // AWS Batch: how long the main node waits for every child to register, and a child tries to register.
  std::chrono::seconds registration_timeout{};
  int registration_port = 0;
  int ssh_port = 0;
  // The sshd every host starts (from the image); "none" when the image starts its own.
  std::string sshd = "/usr/sbin/sshd";
};

// Reads the TRAIN_* variables of docs/environment.md's table; throws ConfigError naming a malformed one.
MultiHostSettings multi_host_settings_from_environment(const EnvironmentMap& environment);

}  // namespace train
