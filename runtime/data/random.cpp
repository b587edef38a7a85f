#include "runtime/data/random.h"

namespace train::data {

namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t random_key(uint64_t seed, RandomStream stream, uint64_t a, uint64_t b) {
  uint64_t key = mix64(seed + 0x9E3779B97F4A7C15ull);
  key = mix64(key ^ (static_cast<uint64_t>(stream) * 0xD1B54A32D192ED03ull));
  key = mix64(key ^ (a + 0x8CB92BA72F3D8DD7ull));
  key = mix64(key ^ (b + 0xABC98388FB8FAC03ull));
  return key;
}

uint64_t Rng::next() {
  state_ += 0x9E3779B97F4A7C15ull;
  return mix64(state_);
}

uint64_t Rng::below(uint64_t n) {
  unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(next()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

}  // namespace train::data
