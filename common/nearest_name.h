// "Did you mean ...?": the closest known name to a misspelt one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace train {

// Edit distance (insertions, deletions, substitutions; letter case and '-' vs '_' cost nothing extra
// beyond one edit each).
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate with the smallest edit distance to `name` (the first one on ties); empty when no candidates.
std::string nearest_name(std::string_view name, const std::vector<std::string_view>& candidates);

}  // namespace train
