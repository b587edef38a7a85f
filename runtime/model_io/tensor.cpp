#include "runtime/model_io/tensor.h"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace train::model_io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this code copies it as it is");

namespace {

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DtypeInfo, 13> dtypes{{
    {Dtype::BOOL, "BOOL", 1},
    {Dtype::U8, "U8", 1},
    {Dtype::I8, "I8", 1},
    {Dtype::U16, "U16", 2},
    {Dtype::I16, "I16", 2},
    {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},
    {Dtype::U32, "U32", 4},
    {Dtype::I32, "I32", 4},
    {Dtype::F32, "F32", 4},
    {Dtype::U64, "U64", 8},
    {Dtype::I64, "I64", 8},
    {Dtype::F64, "F64", 8},
}};

const DtypeInfo& info(Dtype dtype) {
  for (const auto& entry : dtypes) {
    if (entry.dtype == dtype) return entry;
  }
  throw std::logic_error("unknown Dtype value");
}

template <typename T>
T load(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace

size_t dtype_size(Dtype dtype) { return info(dtype).size; }
std::string_view dtype_name(Dtype dtype) { return info(dtype).name; }

std::optional<Dtype> parse_dtype(std::string_view name) {
  for (const auto& entry : dtypes) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

bool is_floating(Dtype dtype) {
  return dtype == Dtype::F16 || dtype == Dtype::BF16 || dtype == Dtype::F32 || dtype == Dtype::F64;
}

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::optional<int64_t> element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t dimension : shape) {
    if (dimension < 0) return std::nullopt;
    if (dimension != 0 && count > std::numeric_limits<int64_t>::max() / dimension) return std::nullopt;
    count *= dimension;
  }
  return count;
}

size_t TensorView::byte_size() const {
  auto count = element_count(shape);
  size_t size = dtype_size(dtype);
  if (!count || static_cast<uint64_t>(*count) > std::numeric_limits<uint64_t>::max() / size) {
    throw std::invalid_argument(fmt::format("tensor \"{}\": invalid shape {}", name, shape_text(shape)));
  }
  return static_cast<size_t>(*count) * size;
}

float half_to_float(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  uint32_t result;
  if (exponent == 0x1F) {
    result = sign | 0x7F800000u | (mantissa << 13);  // infinity or NaN (payload kept)
  } else if (exponent != 0) {
    result = sign | ((exponent + 112) << 23) | (mantissa << 13);  // rebias 15 -> 127
  } else if (mantissa == 0) {
    result = sign;  // signed zero
  } else {
    // Subnormal half: normalise it, since every half subnormal is a normal float.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3FFu;
    result = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(result);
}

float bfloat16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

std::vector<float> Tensor::to_float() const {
  const size_t count = data.size() / dtype_size(dtype);
  std::vector<float> values(count);
  const std::byte* bytes = data.data();
  switch (dtype) {
    case Dtype::F32:
      if (count > 0) std::memcpy(values.data(), bytes, count * sizeof(float));
      break;
    case Dtype::F64:
      for (size_t i = 0; i < count; ++i) values[i] = static_cast<float>(load<double>(bytes + 8 * i));
      break;
    case Dtype::F16:
      for (size_t i = 0; i < count; ++i) values[i] = half_to_float(load<uint16_t>(bytes + 2 * i));
      break;
    case Dtype::BF16:
      for (size_t i = 0; i < count; ++i) values[i] = bfloat16_to_float(load<uint16_t>(bytes + 2 * i));
      break;
    default:
      throw std::invalid_argument(
          fmt::format("tensor \"{}\": expected a floating-point tensor, found {}", name, dtype_name(dtype)));
  }
  return values;
}

std::vector<int64_t> Tensor::to_int64() const {
  const size_t count = data.size() / dtype_size(dtype);
  std::vector<int64_t> values(count);
  const std::byte* bytes = data.data();
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case Dtype::I64: values[i] = load<int64_t>(bytes + 8 * i); break;
      case Dtype::I32: values[i] = load<int32_t>(bytes + 4 * i); break;
      case Dtype::U32: values[i] = load<uint32_t>(bytes + 4 * i); break;
      case Dtype::I16: values[i] = load<int16_t>(bytes + 2 * i); break;
      case Dtype::U16: values[i] = load<uint16_t>(bytes + 2 * i); break;
      case Dtype::I8: values[i] = load<int8_t>(bytes + i); break;
      case Dtype::U8: values[i] = load<uint8_t>(bytes + i); break;
      case Dtype::BOOL: values[i] = load<uint8_t>(bytes + i) != 0; break;
      default:
        throw std::invalid_argument(
            fmt::format("tensor \"{}\": expected an integer tensor, found {}", name, dtype_name(dtype)));
    }
  }
  return values;
}

Tensor Tensor::from_floats(std::string name, std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor tensor{std::move(name), Dtype::F32, std::move(shape), {}};
  tensor.data.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(tensor.data.data(), values.data(), tensor.data.size());
  return tensor;
}

Tensor Tensor::from_int64s(std::string name, std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  Tensor tensor{std::move(name), Dtype::I64, std::move(shape), {}};
  tensor.data.resize(values.size() * sizeof(int64_t));
  if (!values.empty()) std::memcpy(tensor.data.data(), values.data(), tensor.data.size());
  return tensor;
}

}  // namespace train::model_io
