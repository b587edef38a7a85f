#include "runtime/data/records/protobuf_reader.h"

#include <fmt/format.h>

namespace train::data {

namespace {
constexpr int kMaxGroupDepth = 64;  // nested groups deeper than this are refused, not recursed into
}

void ProtoReader::fail(const std::string& reason) const { throw ProtobufError(base_ + position_, reason); }

uint64_t ProtoReader::varint() {
  uint64_t value = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (position_ >= size_) fail("a varint runs past the end of the message");
    const uint8_t byte = data_[position_++];
    if (shift == 63 && byte > 1) fail("a varint is longer than 64 bits");
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return value;
  }
  fail("a varint is longer than 10 bytes");
}

void ProtoReader::skip_value(WireType type, uint32_t number, int depth) {
  switch (type) {
    case WireType::varint: (void)varint(); return;
    case WireType::fixed64:
      if (size_ - position_ < 8) fail("a 64-bit field runs past the end of the message");
      position_ += 8;
      return;
    case WireType::fixed32:
      if (size_ - position_ < 4) fail("a 32-bit field runs past the end of the message");
      position_ += 4;
      return;
    case WireType::length_delimited: {
      const uint64_t length = varint();
      if (length > size_ - position_) {
        fail(fmt::format("a field of {} bytes runs past the end of the message ({} bytes left)", length, size_ - position_));
      }
      position_ += static_cast<size_t>(length);
      return;
    }
    case WireType::start_group: skip_group(number, depth + 1); return;
    case WireType::end_group: fail(fmt::format("an end-group tag for field {} without its start", number));
  }
  fail(fmt::format("wire type {} does not exist (expected 0 to 5)", static_cast<int>(type)));
}

void ProtoReader::skip_group(uint32_t number, int depth) {
  if (depth > kMaxGroupDepth) fail(fmt::format("groups nested more than {} deep", kMaxGroupDepth));
  for (;;) {
    if (position_ >= size_) fail(fmt::format("group {} has no end-group tag", number));
    const uint64_t tag = varint();
    const auto type = static_cast<WireType>(tag & 7);
    const auto inner = static_cast<uint32_t>(tag >> 3);
    if (type == WireType::end_group) {
      if (inner != number) fail(fmt::format("group {} ends with the end-group tag of field {}", number, inner));
      return;
    }
    skip_value(type, inner, depth);
  }
}

bool ProtoReader::next(ProtoField& field) {
  if (position_ >= size_) return false;
  field = ProtoField{};
  field.offset = base_ + position_;
  const uint64_t tag = varint();
  const uint64_t number = tag >> 3;
  const auto wire = static_cast<unsigned>(tag & 7);
  if (number == 0 || number > 0x1fffffff) fail(fmt::format("field number {} is out of range (1 to 2^29-1)", number));
  if (wire > 5) fail(fmt::format("wire type {} does not exist (expected 0 to 5)", wire));
  field.number = static_cast<uint32_t>(number);
  field.type = static_cast<WireType>(wire);
  switch (field.type) {
    case WireType::varint: field.value = varint(); break;
    case WireType::fixed64:
    case WireType::fixed32: {
      const size_t width = field.type == WireType::fixed64 ? 8 : 4;
      if (size_ - position_ < width) fail(fmt::format("a {}-bit field runs past the end of the message", width * 8));
      for (size_t i = 0; i < width; ++i) field.value |= uint64_t{data_[position_ + i]} << (8 * i);
      position_ += width;
      break;
    }
    case WireType::length_delimited: {
      const uint64_t length = varint();
      if (length > size_ - position_) {
        fail(fmt::format("field {} claims {} bytes but only {} are left in the message", number, length, size_ - position_));
      }
      field.data = data_ + position_;
      field.size = static_cast<size_t>(length);
      field.data_offset = base_ + position_;
      position_ += field.size;
      break;
    }
    case WireType::start_group: skip_group(field.number, 1); break;  // reported, its contents skipped
    case WireType::end_group: fail(fmt::format("an end-group tag for field {} without its start", number));
  }
  return true;
}

void read_packed_varints(const ProtoField& field, std::vector<uint64_t>& values) {
  // A packed run is untagged varints back to back, filling the field exactly.
  size_t position = 0;
  while (position < field.size) {
    uint64_t value = 0;
    int shift = 0;
    for (;;) {
      if (position >= field.size) throw ProtobufError(field.data_offset + position, "a packed varint runs past the end of its field");
      if (shift >= 70) throw ProtobufError(field.data_offset + position, "a packed varint is longer than 10 bytes");
      const uint8_t byte = field.data[position++];
      value |= shift < 64 ? uint64_t{byte & 0x7fu} << shift : 0;
      if ((byte & 0x80) == 0) break;
      shift += 7;
    }
    values.push_back(value);
  }
}

}  // namespace train::data
