// What a rank knows about itself from Open MPI, and the environment its program runs with: the
// launcher's, plus the SM_* variables of the rank's own host, plus a thread count that shares the host's
// cores among its ranks.
#pragma once

#include "common/environment_map.h"
#include "job/job_description.h"

#include <optional>

namespace train {

struct RankIdentity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
};

// From OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}; nullopt when not started by Open MPI's mpirun.
std::optional<RankIdentity> rank_identity_from_environment(const EnvironmentMap& environment);

// AWS Batch variables reach every rank from the main node's mpirun, so they name the main node as the
// current host; the host file places ranks on hosts in order, which names the rank's own node. (SageMaker
// ranks read their own host's resourceconfig.json and need nothing.)
void set_current_host_of_rank(JobDescription& job, const RankIdentity& identity);

// `environment` plus SM_* (and the toolkit's CURRENT_HOST, SAGEMAKER_JOB_NAME, SAGEMAKER_REGION) for this
// host, and OMP_NUM_THREADS (unless set) = threads_per_rank.
EnvironmentMap rank_program_environment(const JobDescription& job, const EnvironmentMap& environment,
                                        const RankIdentity& identity);

// Each rank's share of this host's cores: its CPUs / its ranks, at least 1.
int cores_per_rank(const JobDescription& job, const RankIdentity& identity);

// The OpenMP threads each rank of this host computes with: OMP_NUM_THREADS when it holds a count OpenMP
// accepts (a positive number, or a list whose first entry is one), else cores_per_rank.
int threads_per_rank(const JobDescription& job, const RankIdentity& identity, const EnvironmentMap& environment);

}  // namespace train
