// Runs work(i) for every i in [0, count) on a few threads, for start-up work made of many independent pieces
// that each wait on the file system (a class folder's listing, a record file's scan): on a network file system
// mostly for answers, so several at once finish sooner even on few cores. Failures come out as they would
// have one piece after the other: the exception of the lowest i that threw is rethrown, after every piece
// has ended. work(i) must not touch what another piece writes.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace train {

template <typename Work>
void ordered_parallel_for(size_t count, size_t max_threads, Work&& work) {
  std::vector<std::exception_ptr> failures(count);
  std::atomic<size_t> next{0};
  const auto run = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        work(i);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min({cores, std::max<size_t>(max_threads, 1), std::max<size_t>(count, 1)});
  std::vector<std::thread> helpers;
  helpers.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(run);
  run();
  for (auto& helper : helpers) helper.join();
  for (const auto& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

}  // namespace train
