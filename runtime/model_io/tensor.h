// Named tensors as they cross the file boundary: a name, an element type, a shape, and little-endian
// bytes. Independent of the model class: the training loop hands TensorViews of its own buffers to the
// writers, and gets owning Tensors back from the readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train::model_io {

// The element types of the safetensors format. We write F32 and I64; we read all of them, and convert
// F64, F16 and BF16 to float where a float is wanted.
enum class Dtype { BOOL, U8, I8, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64 };

size_t dtype_size(Dtype dtype);
std::string_view dtype_name(Dtype dtype);              // "F32", as the safetensors header spells it
std::optional<Dtype> parse_dtype(std::string_view name);  // exact, case-sensitive
bool is_floating(Dtype dtype);                          // F16, BF16, F32, F64

// "[64, 3, 7, 7]"; "[]" for a scalar.
std::string shape_text(const std::vector<int64_t>& shape);
// The product of the dimensions (1 for a scalar); nullopt when a dimension is negative or it overflows.
std::optional<int64_t> element_count(const std::vector<int64_t>& shape);

// A tensor the caller owns; `data` points at element_count(shape) * dtype_size(dtype) bytes.
struct TensorView {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;

  size_t byte_size() const;  // throws std::invalid_argument for an invalid shape
};

// A tensor read from a file.
struct Tensor {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;

  int64_t elements() const { return static_cast<int64_t>(data.size() / dtype_size(dtype)); }
  TensorView view() const { return {name, dtype, shape, data.data()}; }

  // The values as float (from F32, F64, F16 or BF16). Throws std::invalid_argument for other types.
  std::vector<float> to_float() const;
  // The values as int64 (from I64, I32, I16, I8, U8, U16, U32, BOOL). Throws std::invalid_argument for others.
  std::vector<int64_t> to_int64() const;

  static Tensor from_floats(std::string name, std::vector<int64_t> shape, const std::vector<float>& values);
  static Tensor from_int64s(std::string name, std::vector<int64_t> shape, const std::vector<int64_t>& values);
};

// IEEE half and bfloat16 bits to float (exact; subnormals, infinities and NaN included).
float half_to_float(uint16_t bits);
float bfloat16_to_float(uint16_t bits);

}  // namespace train::model_io
