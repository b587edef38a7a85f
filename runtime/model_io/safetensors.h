// The safetensors format (https://github.com/huggingface/safetensors), written and read without the
// library:
//
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   a UTF-8 JSON object: {"NAME": {"dtype": "F32", "shape": [64, 3, 7, 7],
//             "data_offsets": [BEGIN, END]}, ..., "__metadata__": {"key": "value", ...}},
//             padded with spaces so that the data starts at a multiple of 8 bytes
//   the data  every tensor's bytes, little-endian, row-major; offsets are relative to the data's start
//
// The writer stores the tensors contiguously in the order given. The reader takes files from users (the
// `model` channel), so it trusts nothing: the header length must fit the file, the JSON must be valid
// and free of duplicate names, every dtype must be known, every tensor's bytes must be exactly its shape's,
// and the tensors' byte ranges must lie inside the data, not overlap, and cover it without gaps; a file
// that carries checksums of its tensors (tensor_checksums.h: every file train writes) must match them. Each
// problem is a SafetensorsError whose message names the file, the tensor and what is wrong.
#pragma once

#include "common/atomic_file.h"
#include "runtime/model_io/tensor.h"

#include <cstdint>
#include <map>
#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train::model_io {

using Metadata = std::map<std::string, std::string>;

class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The largest header we accept (the reference implementation's limit too).
constexpr uint64_t safetensors_header_limit = 100'000'000;

struct SafetensorsFile {
  std::vector<Tensor> tensors;  // in the order of their data in the file (the order written)
  Metadata metadata;            // the header's "__metadata__", empty when it has none

  const Tensor* find(std::string_view name) const;  // nullptr when absent
};

// The whole file as bytes. Throws SafetensorsError (naming `source`) for invalid tensors: an empty or
// duplicate name, the name "__metadata__", a negative dimension, or no data for a non-empty tensor.
std::string encode_safetensors(const std::vector<TensorView>& tensors, const Metadata& metadata = {},
                               std::string_view source = "safetensors");

// Writes the file atomically (see common/atomic_file.h): `path` holds either its old content or the
// complete new file. Streams the tensors' bytes from the caller's buffers, without a copy of the file.
void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const Metadata& metadata = {});

// The same into `file` without committing it, for a writer that must do something between the complete
// new file and its rename (a checkpoint keeps the one it replaces).
void write_safetensors(AtomicFile& file, const std::vector<TensorView>& tensors, const Metadata& metadata = {});

// Reads and validates a whole file. Throws SafetensorsError for any fault in the file (see above) and
// for I/O errors, naming `path`.
SafetensorsFile read_safetensors(const std::string& path);

// The same from bytes in memory (tests, fuzzing, a checkpoint sent to every rank); `source` names them in
// messages.
SafetensorsFile parse_safetensors(std::string_view bytes, std::string_view source);

// The bytes of the file at `path`, unparsed, or nullopt when there is none; opened as read_safetensors
// opens it (without blocking: a FIFO in its place is refused). Throws SafetensorsError naming `path`.
std::optional<std::string> read_file_bytes(const std::string& path);

}  // namespace train::model_io
