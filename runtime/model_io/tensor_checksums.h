// A checksum of every tensor's bytes, stored in the file's own metadata, so that a damaged checkpoint or
// model file (one flipped bit in a weight's exponent turns 0.03 into -34) is refused with the tensor's name
// instead of being trained on. The metadata entry "tensor_crc32" holds a JSON object mapping each tensor's
// name to the CRC-32 (zlib's, as Python's zlib.crc32) of its data bytes, as 8 lower-case hex digits.
// Other safetensors readers ignore metadata, so the files stay plain safetensors.
#pragma once

#include "runtime/model_io/safetensors.h"
#include "runtime/model_io/tensor.h"

#include <string_view>
#include <vector>

namespace train::model_io {

constexpr std::string_view tensor_checksums_key = "tensor_crc32";

// `metadata` with the checksums of `tensors` added under tensor_checksums_key.
Metadata with_tensor_checksums(const std::vector<TensorView>& tensors, Metadata metadata);

// Checks every tensor of `file` against its stored checksum when the file has checksums (the safetensors
// readers call it on every file they read). Throws SafetensorsError naming `source` and the first tensor
// whose bytes do not match (or that has no checksum, or a checksum for a tensor the file does not hold).
void verify_tensor_checksums(const SafetensorsFile& file, std::string_view source);

// Refuses (SafetensorsError naming `source`) a file without checksums, for the files that must have them.
void require_tensor_checksums(const SafetensorsFile& file, std::string_view source);

}  // namespace train::model_io
