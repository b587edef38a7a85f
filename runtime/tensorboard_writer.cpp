#include "runtime/tensorboard_writer.h"

#include "common/atomic_file.h"
#include "common/log.h"
#include "runtime/data/records/crc32c.h"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <unistd.h>

namespace train {

namespace {

// Protocol buffer wire format: what tensorflow.Event, Summary and Summary.Value need.
enum WireType : uint8_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_key(std::string& out, uint32_t field, WireType type) { put_varint(out, (uint64_t{field} << 3) | type); }

template <typename T>
void put_little_endian(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, length_delimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_double(std::string& out, uint32_t field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, fixed64);
  put_little_endian(out, bits);
}

void put_float(std::string& out, uint32_t field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, fixed32);
  put_little_endian(out, bits);
}

// tensorflow/core/util/event.proto and framework/summary.proto field numbers.
constexpr uint32_t event_wall_time = 1, event_step = 2, event_file_version = 3, event_summary = 5;
constexpr uint32_t summary_value = 1;
constexpr uint32_t value_tag = 1, value_simple_value = 2;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string encode_file_version_event(double wall_time) {
  std::string event;
  put_double(event, event_wall_time, wall_time);
  put_bytes(event, event_file_version, "brain.Event:2");
  return event;
}

std::string encode_scalar_event(double wall_time, int64_t step,
                                const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string entry;
    put_bytes(entry, value_tag, tag);
    put_float(entry, value_simple_value, value);
    put_bytes(summary, summary_value, entry);
  }
  std::string event;
  put_double(event, event_wall_time, wall_time);
  put_key(event, event_step, varint);
  put_varint(event, static_cast<uint64_t>(step));
  put_bytes(event, event_summary, summary);
  return event;
}

std::string tfrecord_frame(std::string_view data) {
  std::string record;
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(data.size()));
  record += length;
  put_little_endian(record, data::masked_crc32c(reinterpret_cast<const uint8_t*>(length.data()), length.size()));
  record.append(data);
  put_little_endian(record, data::masked_crc32c(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  return record;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& directory, const std::string& host) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  const double started = now_seconds();
  // TensorFlow's name; the loader picks files whose name holds "tfevents", in name order.
  path_ = directory / fmt::format("events.out.tfevents.{}.{}", static_cast<int64_t>(started), host);
  fd_ = open_file_for_appending(path_.string());
  if (fd_ < 0) {
    throw std::runtime_error(fmt::format("cannot create the TensorBoard events file {}: {}", path_.string(),
                                         std::strerror(errno)));
  }
  pending_ = tfrecord_frame(encode_file_version_event(started));
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::scalar(std::string_view tag, int64_t step, double value) {
  if (step != step_) close_step();
  step_ = step;
  scalars_.emplace_back(std::string(tag), static_cast<float>(value));
}

void TensorBoardWriter::close_step() {
  if (!scalars_.empty()) pending_ += tfrecord_frame(encode_scalar_event(now_seconds(), step_, scalars_));
  scalars_.clear();
}

void TensorBoardWriter::flush() {
  close_step();
  if (pending_.empty()) return;
  if (!write_fully(fd_, pending_)) {
    throw std::runtime_error(fmt::format("cannot write the TensorBoard events file {}: {}", path_.string(),
                                         std::strerror(errno)));
  }
  pending_.clear();
}

}  // namespace train
