// Which samples a rank reads in an epoch, as PyTorch's DistributedSampler (drop_last=False) decides:
// the epoch's order (a permutation seeded by `seed` and the epoch, or 0..n-1 when shuffle is off) is
// padded to a multiple of the number of ranks sharing the data by repeating it from the start, and
// rank r takes positions r, r+R, r+2R, ... Every rank gets the same number of samples, ceil(n/R), so
// every rank runs the same number of steps. The permutation is our own (Fisher-Yates over our Rng), not
// torch.randperm's: the same seed gives the same order here on every machine, not the order PyTorch gives.
#pragma once

#include <cstdint>
#include <vector>

namespace train::data {

// The dataset indices of one epoch, in order (before padding).
std::vector<int64_t> epoch_order(int64_t dataset_size, uint64_t seed, int64_t epoch, bool shuffle);

// ceil(dataset_size / ranks): how many samples every rank reads per epoch.
int64_t shard_size(int64_t dataset_size, int ranks);

// Rank `rank`'s samples of an epoch given the epoch's order: order[(rank + i*ranks) % n] for
// i < count (the modulo is DistributedSampler's padding, which repeats from the start). count defaults to
// shard_size(n, ranks); a larger one pads further, going round the order again if need be: with
// ShardedByS3Key every host holds its own files, and the ranks of a host with fewer samples read as many as
// those of the fullest host, so that every rank of the job runs the same number of steps.
std::vector<int64_t> shard_of(const std::vector<int64_t>& order, int rank, int ranks, int64_t count = -1);

// Both steps at once.
std::vector<int64_t> epoch_shard(int64_t dataset_size, uint64_t seed, int64_t epoch, bool shuffle, int rank,
                                 int ranks, int64_t count = -1);

}  // namespace train::data
