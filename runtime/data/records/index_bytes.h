// The byte layout an index travels in from the process that built it to the others (a record index, an
// image folder's file list): fixed-size values as they lie in memory (every rank runs the same binary on the
// same kind of machine), texts and lists preceded by their 64-bit length. The reader checks every length
// against what is left and throws DataError naming the index.
#pragma once

#include "runtime/data/data_error.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace train::data {

template <typename T>
void put_value(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

inline void put_text(std::string& out, const std::string& text) {
  put_value<uint64_t>(out, text.size());
  out += text;
}

class IndexBytes {
 public:
  // `what`: the index as messages name it ("a shared record index").
  IndexBytes(const std::string& bytes, size_t start, const char* what) : bytes_(bytes), position_(start), what_(what) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + position_, sizeof value);
    position_ += sizeof value;
    return value;
  }
  std::string text() {
    const auto size = get<uint64_t>();
    need(size);
    std::string value = bytes_.substr(position_, static_cast<size_t>(size));
    position_ += static_cast<size_t>(size);
    return value;
  }
  uint64_t count(size_t item_bytes) {  // a count of items that must fit in what is left
    const auto n = get<uint64_t>();
    need(n * item_bytes);
    return n;
  }
  bool done() const { return position_ == bytes_.size(); }

 private:
  void need(uint64_t size) const {
    if (size > bytes_.size() - position_) {
      throw DataError(fmt::format("{} is cut short (an internal error: its builder and reader disagree)", what_));
    }
  }
  const std::string& bytes_;  // the caller's: outlives this reader
  size_t position_;
  const char* what_;
};

}  // namespace train::data
