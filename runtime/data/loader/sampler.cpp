#include "runtime/data/loader/sampler.h"

#include "runtime/data/random.h"

#include <fmt/format.h>

#include <numeric>
#include <stdexcept>
#include <utility>

namespace train::data {

std::vector<int64_t> epoch_order(int64_t dataset_size, uint64_t seed, int64_t epoch, bool shuffle) {
  if (dataset_size < 0) throw std::invalid_argument(fmt::format("dataset size {} is negative", dataset_size));
  std::vector<int64_t> order(static_cast<size_t>(dataset_size));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (shuffle) {
    Rng rng(random_key(seed, RandomStream::epoch_order, static_cast<uint64_t>(epoch)));
    for (int64_t i = dataset_size - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
      std::swap(order[i], order[j]);
    }
  }
  return order;
}

int64_t shard_size(int64_t dataset_size, int ranks) {
  if (ranks < 1) throw std::invalid_argument(fmt::format("ranks must be at least 1, got {}", ranks));
  return (dataset_size + ranks - 1) / ranks;
}

std::vector<int64_t> shard_of(const std::vector<int64_t>& order, int rank, int ranks, int64_t count) {
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    throw std::invalid_argument(fmt::format("rank {} is not in [0, {})", rank, ranks));
  }
  const auto n = static_cast<int64_t>(order.size());
  std::vector<int64_t> shard;
  if (n == 0) return shard;
  if (count < 0) count = shard_size(n, ranks);
  if (count < shard_size(n, ranks)) {
    throw std::invalid_argument(fmt::format("{} samples per rank would leave samples of {} unread by {} ranks", count, n, ranks));
  }
  shard.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) shard.push_back(order[static_cast<size_t>((rank + i * ranks) % n)]);
  return shard;
}

std::vector<int64_t> epoch_shard(int64_t dataset_size, uint64_t seed, int64_t epoch, bool shuffle, int rank,
                                 int ranks, int64_t count) {
  return shard_of(epoch_order(dataset_size, seed, epoch, shuffle), rank, ranks, count);
}

}  // namespace train::data
