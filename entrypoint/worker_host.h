// A worker host's part of a multi-host job: its sshd is up; the master's mpirun starts the ranks here
// through it. The worker waits (bounded) for them to appear, watches them until they are gone, and
// watches the master throughout, so that a lost master ends this host too instead of hanging it.
#pragma once

#include "entrypoint/job_waiter.h"
#include "entrypoint/multi_host_settings.h"
#include "job/job_description.h"

#include <chrono>
#include <string>

namespace train {

// Returns 0 when this host's ranks have come and gone while the master stayed reachable (the master
// reports the job's outcome), after waiting (bounded: TRAIN_MASTER_LINGER_SECONDS + TRAIN_MASTER_LOST_SECONDS
// + 30 s) until the master is gone and 2 s more, so that the master exits first, as under the toolkit;
// a stop signal ends that wait at once, still with 0. 128+N after a stop signal N while the ranks run. Throws HostFailure when the master never
// answered, the ranks never appeared, or the master was lost.
int run_worker(const JobDescription& job, const std::string& master_address, const MultiHostSettings& settings,
               std::chrono::seconds stop_grace, JobWaiter& waiter);

// A host outside the training instance groups (job/training_hosts.h): no rank runs here. It waits
// (bounded) for the master to answer, then for the job's end, which is when the master stops answering for
// TRAIN_MASTER_LOST_SECONDS, and returns 0 (the master reports the job's outcome); 128+N after a stop signal
// N. Throws HostFailure when the master never answered or the job outlasted settings.idle_timeout.
int run_idle_host(const JobDescription& job, const std::string& master_address, const MultiHostSettings& settings,
                  JobWaiter& waiter);

}  // namespace train
