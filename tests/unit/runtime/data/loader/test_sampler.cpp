#include "runtime/data/loader/sampler.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>

using namespace train::data;

namespace {

// torch.utils.data.DistributedSampler.__iter__ (drop_last=False), transcribed.
std::vector<int64_t> distributed_sampler(std::vector<int64_t> indices, int rank, int ranks) {
  const auto n = static_cast<int64_t>(indices.size());
  const int64_t num_samples = (n + ranks - 1) / ranks;  // math.ceil(len(dataset) / num_replicas)
  const int64_t total_size = num_samples * ranks;
  const int64_t padding_size = total_size - n;
  if (padding_size <= n) {
    indices.insert(indices.end(), indices.begin(), indices.begin() + padding_size);
  } else {
    const int64_t repeats = (padding_size + n - 1) / n;
    std::vector<int64_t> repeated;
    for (int64_t r = 0; r < repeats; ++r) repeated.insert(repeated.end(), indices.begin(), indices.end());
    indices.insert(indices.end(), repeated.begin(), repeated.begin() + padding_size);
  }
  std::vector<int64_t> shard;
  for (int64_t i = rank; i < total_size; i += ranks) shard.push_back(indices[static_cast<size_t>(i)]);
  return shard;
}

}  // namespace

TEST_CASE("sampler: shuffle off gives the sorted order", "[data]") {
  std::vector<int64_t> sorted(10);
  std::iota(sorted.begin(), sorted.end(), 0);
  CHECK(epoch_order(10, 123, 5, false) == sorted);
  CHECK(epoch_shard(10, 0, 0, false, 0, 1) == sorted);
  CHECK(epoch_shard(10, 0, 0, false, 1, 3) == std::vector<int64_t>{1, 4, 7, 0});  // padded with 0, 1
  CHECK(epoch_shard(10, 0, 0, false, 2, 3) == std::vector<int64_t>{2, 5, 8, 1});
  CHECK(epoch_shard(10, 0, 0, false, 0, 3) == std::vector<int64_t>{0, 3, 6, 9});
}

TEST_CASE("sampler: a seeded permutation per epoch", "[data]") {
  const auto a = epoch_order(1000, 7, 0, true);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(1000);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(sorted == expected);
  CHECK(a != expected);
  CHECK(a == epoch_order(1000, 7, 0, true));
  CHECK(a != epoch_order(1000, 7, 1, true));
  CHECK(a != epoch_order(1000, 8, 0, true));
}

TEST_CASE("sampler: every sample once per epoch across R ranks, padded as DistributedSampler", "[data]") {
  for (int ranks : {1, 3, 8}) {
    for (int64_t n : {1, 2, 3, 7, 8, 10, 24, 101}) {
      for (bool shuffle : {false, true}) {
        INFO("ranks " << ranks << " n " << n << " shuffle " << shuffle);
        const auto order = epoch_order(n, 3, 2, shuffle);
        const int64_t per_rank = shard_size(n, ranks);
        CHECK(per_rank == (n + ranks - 1) / ranks);
        std::map<int64_t, int> seen;
        std::vector<int64_t> interleaved(static_cast<size_t>(per_rank * ranks));
        for (int rank = 0; rank < ranks; ++rank) {
          const auto shard = epoch_shard(n, 3, 2, shuffle, rank, ranks);
          REQUIRE(shard == distributed_sampler(order, rank, ranks));
          REQUIRE(static_cast<int64_t>(shard.size()) == per_rank);
          for (size_t i = 0; i < shard.size(); ++i) {
            ++seen[shard[i]];
            interleaved[i * ranks + rank] = shard[i];
          }
        }
        // Every sample at least once; the padding repeats the order from its start.
        REQUIRE(static_cast<int64_t>(seen.size()) == n);
        for (int64_t k = 0; k < per_rank * ranks; ++k) {
          REQUIRE(interleaved[static_cast<size_t>(k)] == order[static_cast<size_t>(k % n)]);
        }
        const int64_t padding = per_rank * ranks - n;
        int64_t extra = 0;
        for (auto [index, count] : seen) extra += count - 1;
        CHECK(extra == padding);
        if (padding == 0) {
          for (auto [index, count] : seen) CHECK(count == 1);
        }
      }
    }
  }
}
