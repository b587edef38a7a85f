// `train rank`: what mpirun starts on every rank. It bootstraps MPI, finds its place (rank, local rank,
// the device it pins), checks that a collective works across the whole job, and (with the training
// issue) trains. Also what the launcher must know of the rank's side before it starts one (main.cpp is the
// one file that sees both).
#pragma once

#include "job/job_description.h"

#include <cstdint>

namespace train {

int run_rank();

// The least number of bytes train's checkpoint of `job` takes (its tensors alone: the model's parameters and
// buffers and the optimizer's momentum, without the header); num_classes from the hyperparameters, or 1 when
// the data decides (the least). The launcher checks the file-size limit (RLIMIT_FSIZE) against it before
// anything starts (runtime/checkpoint_size.cpp).
uint64_t least_checkpoint_bytes(const JobDescription& job);

}  // namespace train
