// The learning rate at every step: linear warm-up from 0 to the peak, then step, poly or cosine decay to
// the end of training. The peak is `learning_rate` scaled linearly with the global batch (Goyal et al.:
// the rate given is the one for a global batch of 256).
#pragma once

#include "job/training_choices.h"

#include <cstdint>
#include <vector>

namespace train {

struct LearningRateSchedule {
  double peak = 0.1;
  LrDecay decay = LrDecay::cosine;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  int64_t steps_per_epoch = 1;
  std::vector<int64_t> step_epochs;  // for `step`: epochs at which the rate is multiplied by `step_factor`
  double step_factor = 0.1;

  // The rate for the update made at `step` (0-based).
  double at(int64_t step) const;
};

// Peak rate for `learning_rate` (given for a global batch of 256) at `global_batch`.
double scaled_peak_learning_rate(double learning_rate, int64_t global_batch);

}  // namespace train
