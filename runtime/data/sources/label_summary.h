// What a training channel's labels look like, gathered while it is opened: their range, the label just
// below the highest, and where the highest one is. The trainer checks with it that the data has at least two
// classes and no label far beyond the others (one mistyped label in an .lst file would otherwise make a model
// of a million classes), and names that label's file when it is out of range.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace train::data {

struct LabelSummary {
  int32_t lowest = std::numeric_limits<int32_t>::max();
  int32_t highest = -1;
  int32_t below_highest = -1;  // the highest label other than `highest`; -1 when there is none
  std::string highest_at;      // where a sample with the highest label is (a file, a byte offset)

  // Adds one sample's label; `where` is asked only for a new highest label.
  template <typename Where>
  void add(int32_t label, Where&& where) {
    if (label < lowest) lowest = label;
    if (label > highest) {
      if (highest >= 0) below_highest = highest;
      highest = label;
      highest_at = where();
    } else if (label < highest && label > below_highest) {
      below_highest = label;
    }
  }
};

}  // namespace train::data
