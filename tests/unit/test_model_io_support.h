// Shared by the model_io tests (tests/unit/runtime/model_io/) and others that check model files: a scratch
// directory, file helpers, raw safetensors bytes.
#pragma once

#include "tests/unit/temp_folder.h"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace model_io_test {

// A fresh directory under /tmp, removed with everything in it at the end of the test.
class ScratchDir : public train::testing::TempFolder {
 public:
  ScratchDir() : TempFolder("model_io_test") {}
  std::string file(const std::string& name) const { return (path() / name).string(); }
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::string length_prefix(uint64_t length) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  return bytes;
}

// A safetensors file with the given header text (unpadded, as given) and `data_size` data bytes.
inline std::string raw_file(const std::string& header, size_t data_size) {
  return length_prefix(header.size()) + header + std::string(data_size, '\x01');
}

}  // namespace model_io_test
