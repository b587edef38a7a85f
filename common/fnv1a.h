// FNV-1a, 64 bits: a checksum of bytes that every host computes alike (the replicas' parameters, the parts of
// a job description every host must agree on). Not a defence against anyone: a way to compare.
#pragma once

#include <cstddef>
#include <cstdint>

namespace train {

class Fnv1a64 {
 public:
  void add(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      hash_ ^= bytes[i];
      hash_ *= 0x100000001b3ull;
    }
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

// FNV-1a (64-bit) of `size` bytes.
inline uint64_t fnv1a64(const void* data, size_t size) {
  Fnv1a64 hash;
  hash.add(data, size);
  return hash.value();
}

}  // namespace train
