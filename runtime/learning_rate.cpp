#include "runtime/learning_rate.h"

#include <algorithm>
#include <cmath>

namespace train {

double scaled_peak_learning_rate(double learning_rate, int64_t global_batch) {
  return learning_rate * static_cast<double>(global_batch) / 256.0;
}

double LearningRateSchedule::at(int64_t step) const {
  if (step < warmup_steps) {
    // Reach the peak at the end of warm-up, never start at exactly 0 (a wasted step).
    return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  if (decay == LrDecay::step) {
    int64_t epoch = step / std::max<int64_t>(1, steps_per_epoch);
    int passed = static_cast<int>(std::count_if(step_epochs.begin(), step_epochs.end(),
                                                [&](int64_t milestone) { return epoch >= milestone; }));
    return peak * std::pow(step_factor, passed);
  }
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  const double progress = std::clamp(static_cast<double>(step - warmup_steps) / span, 0.0, 1.0);
  if (decay == LrDecay::poly) return peak * (1.0 - progress) * (1.0 - progress);
  return peak * 0.5 * (1.0 + std::cos(M_PI * progress));  // cosine
}

}  // namespace train
