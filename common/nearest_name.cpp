#include "common/nearest_name.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace train {

namespace {

// Case and separator differences are the commonest slips ("Learning-Rate"), so they compare equal.
char fold(char c) {
  if (c == '-') return '_';
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  std::iota(previous.begin(), previous.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t substitution = previous[j - 1] + (fold(a[i - 1]) == fold(b[j - 1]) ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string nearest_name(std::string_view name, const std::vector<std::string_view>& candidates) {
  std::string best;
  size_t best_distance = static_cast<size_t>(-1);
  for (auto candidate : candidates) {
    size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = std::string(candidate);
    }
  }
  return best;
}

}  // namespace train
