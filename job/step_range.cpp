#include "job/step_range.h"

#include <fmt/format.h>

#include <charconv>

namespace train {

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

// Digits only (no sign), at most 15 of them: a step number.
std::optional<int64_t> parse_step(std::string_view text) {
  text = trim(text);
  if (text.empty() || text.size() > 15) return std::nullopt;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.front() == '-' || text.front() == '+') {
    return std::nullopt;
  }
  return value;
}

}  // namespace

std::optional<StepRange> parse_step_range(std::string_view text) {
  const size_t dash = text.find('-');
  const auto first = parse_step(text.substr(0, dash));
  const auto last = dash == std::string_view::npos ? first : parse_step(text.substr(dash + 1));
  if (!first || !last || *first < 1 || *last < *first) return std::nullopt;
  const StepRange range{*first, *last};
  if (range.steps() > max_timeline_steps) return std::nullopt;
  return range;
}

std::string describe_step_range_format() {
  return fmt::format("a range of steps \"FIRST-LAST\" such as \"11-20\" (1-based, both included, at most {} steps), "
                     "or one step",
                     max_timeline_steps);
}

}  // namespace train
