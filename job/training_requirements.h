// What train's own training needs of its job that the schema of a single key cannot say: a training
// channel (or synthetic data), Pipe mode's format and up-front counts, a validation channel it can read
// whole, and at least two images per rank. Checked with the rest of the job description, so that `train`
// refuses such a job before any rank starts and `train validate` lists these problems with all the others.
#pragma once

#include "common/config_error.h"
#include "job/job_description.h"
#include "job/step_range.h"

#include <optional>

namespace train {

// The training channel: "train", else "training"; null when the job has neither.
const Channel* training_channel(const InputDataConfig& input);

// Adds to `problems` what train's own training cannot do with `job` (whose hyperparameters were read and
// whose ranks per host are resolved). `channels_read`: inputdataconfig.json was read (or is absent); when it
// was not, its own problem is reported and the channels are not judged.
void check_training_requirements(const JobDescription& job, bool channels_read, ConfigProblems& problems);

// The timeline's steps: hyperparameter timeline_steps and environment variable TRAIN_TIMELINE (which must
// agree when both are set). Throws ConfigError for a malformed variable or two different ranges.
std::optional<StepRange> timeline_steps(const Hyperparameters& hyperparameters, const EnvironmentMap& environment);

}  // namespace train
