// A job on several hosts (docs/architecture.md, data flow). Every host checks its network interface and starts sshd. On AWS
// Batch the children register with the main node. The master then waits (bounded) until every other
// host's sshd answers, writes the host file and runs mpirun across them; the others are workers that wait
// for their ranks to come and go, and give up on a master that is lost. Hosts outside the training instance
// groups (job/training_hosts.h) run nothing and wait for the master to end.
#pragma once

#include "common/environment_map.h"
#include "entrypoint/launcher.h"
#include "job/job_description.h"

namespace train {

// Runs this host's part of the job; returns this host's exit code (docs/faults.md).
int run_multi_host(JobDescription job, const LaunchSettings& settings, const EnvironmentMap& environment);

}  // namespace train
