// This host's monotonic clock in nanoseconds (CLOCK_MONOTONIC, which std::chrono::steady_clock reads on
// Linux): one clock for every process of the host, so the ranks of a host need no alignment among themselves.
#pragma once

#include <chrono>
#include <cstdint>

namespace train {

inline int64_t monotonic_ns(std::chrono::steady_clock::time_point time) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}

inline int64_t monotonic_ns() { return monotonic_ns(std::chrono::steady_clock::now()); }

// Whole seconds from `start` to now on that clock: what the launcher's progress lines count.
inline long long seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace train
