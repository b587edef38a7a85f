// The least number of bytes train's checkpoint of a job takes (its tensors alone: the model's parameters and
// buffers and the optimizer's momentum, without the header), from the job's hyperparameters. The launcher
// checks the file-size limit (RLIMIT_FSIZE) against it before anything starts: a checkpoint that grows past
// the limit failed the rank with SIGXFSZ, or now with "File too large" (docs/faults.md).
#pragma once

#include "job/job_description.h"

#include <cstdint>

namespace train {

// For train's own training; num_classes from the hyperparameters, or 1 when the data decides (the least).
uint64_t least_checkpoint_bytes(const JobDescription& job);

}  // namespace train
