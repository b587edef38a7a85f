// The data pipeline's randomness. Every draw derives from the job's `seed` through a key, so that what
// happens to sample i in epoch e depends only on (seed, epoch, i) and never on which thread decodes it.
// SplitMix64 is small and fully specified (unlike std:: distributions), so every build draws the same.
#pragma once

#include <cstdint>

namespace train::data {

// Independent streams drawn from one seed.
enum class RandomStream : uint64_t { epoch_order = 1, sample_augmentation = 2, synthetic_image = 3 };

// A well-mixed 64-bit key for (seed, stream, a, b).
uint64_t random_key(uint64_t seed, RandomStream stream, uint64_t a, uint64_t b = 0);

class Rng {
 public:
  explicit Rng(uint64_t key) : state_(key) {}
  uint64_t next();
  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }
  // Uniform integer in [0, n), unbiased (Lemire's method); n > 0.
  uint64_t below(uint64_t n);

 private:
  uint64_t state_;
};

}  // namespace train::data
