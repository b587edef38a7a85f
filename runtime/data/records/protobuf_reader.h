// A small reader of the protobuf wire format, enough for tf.train.Example and nothing more: it walks the
// fields of one message (varint, 64-bit, length-delimited, 32-bit; groups are skipped), never reads past
// the message, and reports malformed input as ProtobufError with the offset inside the message. No
// protobuf library and no generated code: the schema we need is three nested messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace train::data {

class ProtobufError : public std::runtime_error {
 public:
  ProtobufError(size_t offset, const std::string& reason) : std::runtime_error(reason), offset_(offset) {}
  size_t offset() const { return offset_; }  // within the outermost message given to the reader

 private:
  size_t offset_;
};

enum class WireType : uint8_t { varint = 0, fixed64 = 1, length_delimited = 2, start_group = 3, end_group = 4, fixed32 = 5 };

struct ProtoField {
  uint32_t number = 0;
  WireType type = WireType::varint;
  uint64_t value = 0;            // varint, fixed64 and fixed32 fields
  const uint8_t* data = nullptr;  // length-delimited fields: the bytes
  size_t size = 0;
  size_t offset = 0;              // where the field's tag starts, from the outermost message
  size_t data_offset = 0;         // where a length-delimited field's bytes start, likewise
};

class ProtoReader {
 public:
  // `base` is the offset of `data` within the outermost message, for error offsets of nested readers.
  ProtoReader(const uint8_t* data, size_t size, size_t base = 0) : data_(data), size_(size), base_(base) {}
  // The next field, or false at the end of the message. Groups are skipped whole.
  bool next(ProtoField& field);
  // A reader over a length-delimited field's bytes, as a nested message.
  static ProtoReader nested(const ProtoField& field) { return ProtoReader(field.data, field.size, field.data_offset); }

 private:
  uint64_t varint();
  void skip_group(uint32_t number, int depth);
  void skip_value(WireType type, uint32_t number, int depth);
  [[noreturn]] void fail(const std::string& reason) const;

  const uint8_t* data_;
  size_t size_;
  size_t base_;
  size_t position_ = 0;
};

// Appends the varints of a packed repeated field (a length-delimited field of back-to-back varints).
void read_packed_varints(const ProtoField& field, std::vector<uint64_t>& values);

}  // namespace train::data
