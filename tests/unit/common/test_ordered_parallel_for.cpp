// ordered_parallel_for: every piece runs once, and a failure is the one of the lowest piece that failed.
#include "common/ordered_parallel_for.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

TEST_CASE("ordered parallel for: every piece once, and the lowest failing piece's exception", "[common]") {
  std::vector<std::atomic<int>> runs(1000);
  train::ordered_parallel_for(runs.size(), 8, [&](size_t i) { ++runs[i]; });
  for (const auto& count : runs) CHECK(count.load() == 1);

  std::atomic<int> done{0};
  try {
    train::ordered_parallel_for(500, 8, [&](size_t i) {
      ++done;
      if (i == 317 || i == 42 || i == 499) throw std::runtime_error("piece " + std::to_string(i));
    });
    FAIL("no exception");
  } catch (const std::runtime_error& error) {
    CHECK(std::string(error.what()) == "piece 42");
  }
  CHECK(done.load() == 500);  // the others still ran: what the caller sees does not depend on timing
  train::ordered_parallel_for(0, 8, [](size_t) { FAIL("no piece to run"); });
}
