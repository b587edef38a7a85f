// The memory a container holds, from its capacity: what an index of millions of samples costs, measured
// rather than guessed (an index's own count, independent of the allocator's rounding and of other threads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace train {

// A string's own bytes plus its heap buffer (none while the text fits the small-string buffer).
inline int64_t string_bytes(const std::string& text) {
  const std::string empty;
  const bool on_heap = text.capacity() > empty.capacity();
  return static_cast<int64_t>(sizeof(std::string) + (on_heap ? text.capacity() + 1 : 0));
}

// A vector's heap buffer (its capacity), not counting what its elements point to.
template <typename T>
int64_t vector_bytes(const std::vector<T>& values) {
  return static_cast<int64_t>(values.capacity() * sizeof(T));
}

// A vector of strings: its buffer and every string's heap buffer.
inline int64_t strings_bytes(const std::vector<std::string>& texts) {
  int64_t bytes = vector_bytes(texts);
  for (const auto& text : texts) bytes += string_bytes(text) - static_cast<int64_t>(sizeof(std::string));
  return bytes;
}

}  // namespace train
