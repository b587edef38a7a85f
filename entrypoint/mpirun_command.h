// The mpirun command line for a job: one slot per rank on every host, the job's network interface for
// both Open MPI's and NCCL's traffic, the launcher's environment exported, the user's options last.
#pragma once

#include "common/environment_map.h"
#include "job/job_description.h"

#include <string>
#include <vector>

namespace train {

// `rank_program` is what every rank runs, e.g. {"/usr/local/bin/train", "rank"}. A multi-host job names its
// hosts in `hostfile` (see hostfile_text); without one, they go on the command line.
std::vector<std::string> build_mpirun_command(const JobDescription& job, const std::vector<std::string>& rank_program,
                                              const EnvironmentMap& environment, const std::string& mpirun = "mpirun",
                                              const std::string& hostfile = "");

// Open MPI's host file: one line per host, in rank order, with one slot per rank.
std::string hostfile_text(const std::vector<std::string>& hosts, int slots_per_host);

// Which host runs `rank` under the slot mapping we ask mpirun for (hosts in order, slots filled in turn).
std::string host_of_rank(const JobDescription& job, int rank);

// Variables the ranks must not inherit from the launcher: per-host shell state, Open MPI's own, and
// SM_* (each rank computes those for its own host).
bool is_host_specific_variable(const std::string& name);

}  // namespace train
