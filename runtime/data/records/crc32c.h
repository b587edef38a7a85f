// CRC-32C (Castagnoli), the checksum TFRecord framing uses, and TensorFlow's "masked" form of it. The
// mask exists because a CRC computed over data that itself holds CRCs is weak; TFRecord stores
// masked_crc = rotate_right(crc, 15) + 0xa282ead8 for both the length and the data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace train::data {

// CRC-32C of `size` bytes, continuing from `crc` (0 for a fresh checksum).
// The CPU's crc32 instruction where it has one (x86-64 with SSE 4.2), else crc32c_portable.
uint32_t crc32c(const uint8_t* data, size_t size, uint32_t crc = 0);

// The same from tables, on any CPU (what crc32c falls back to; tests compare the two).
uint32_t crc32c_portable(const uint8_t* data, size_t size, uint32_t crc = 0);

inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

inline uint32_t masked_crc32c(const uint8_t* data, size_t size) { return mask_crc32c(crc32c(data, size)); }

}  // namespace train::data
