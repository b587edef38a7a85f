// The training loop of a CPU rank: data, model, bucketed gradient reduction, optimizer, metrics,
// validation, checkpoints and the model file. Every rank runs it; rank 0 logs and writes files.
#pragma once

#include "../entrypoint/job_description.h"
#include "../entrypoint/rank_environment.h"

#include <mpi.h>

namespace train {

// Returns the rank's exit code: 0 when training finished or stopped on request (after its checkpoint).
// Throws ConfigError for a job it cannot train, DataError for bad data, MpiError for a broken job.
int run_cpu_training(const JobDescription& job, const RankIdentity& identity, MPI_Comm comm);

}  // namespace train
