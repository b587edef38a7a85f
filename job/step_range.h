// A range of training steps, "FIRST-LAST" (1-based, both included): the steps the timeline records
// (hyperparameter timeline_steps, environment variable TRAIN_TIMELINE). One parser for both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace train {

// The most steps one timeline records: its files stay a few MB (runtime/timeline/).
inline constexpr int64_t max_timeline_steps = 200;

struct StepRange {
  int64_t first = 1;
  int64_t last = 1;
  int64_t steps() const { return last - first + 1; }
  friend bool operator==(const StepRange&, const StepRange&) = default;
};

// "10-20" or "15" (one step); spaces around the numbers are allowed. nullopt for anything else, for a
// first step below 1, a last step before the first, or more than max_timeline_steps steps.
std::optional<StepRange> parse_step_range(std::string_view text);

// What parse_step_range accepts, for error messages.
std::string describe_step_range_format();

}  // namespace train
