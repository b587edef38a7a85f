// The data tests' reading of a loader to its end, and their comparison of two runs' batches.
#pragma once

#include "runtime/data/loader/batch_loader.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <vector>

namespace train::data::testing {

// Every batch the loader gives until its end (at most `limit`), each within 30 s.
inline std::vector<Batch> drain(BatchLoader& loader, int limit = 1000) {
  std::vector<Batch> batches;
  for (int i = 0; i < limit; ++i) {
    Batch batch;
    const auto status = loader.next(batch, std::chrono::seconds(30));
    if (status == BatchLoader::Status::end) break;
    REQUIRE(status == BatchLoader::Status::batch);
    batches.push_back(std::move(batch));
  }
  return batches;
}

// The same batches: positions, samples, labels, and the images bit for bit.
inline void require_same_batches(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("batch " << i);
    REQUIRE(a[i].position == b[i].position);
    REQUIRE(a[i].next == b[i].next);
    REQUIRE(a[i].size == b[i].size);
    REQUIRE(a[i].samples == b[i].samples);
    REQUIRE(a[i].labels == b[i].labels);
    REQUIRE(a[i].images == b[i].images);  // bit-identical
  }
}

}  // namespace train::data::testing
