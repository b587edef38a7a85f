// TensorBoard event files, written without TensorFlow: the format TensorBoard's own reader takes. A file
// `events.out.tfevents.<seconds>.<host>` holds TFRecord records (uint64 length, masked CRC-32C of the
// length, the data, masked CRC-32C of the data), each a serialized tensorflow.Event: the first says the
// file version ("brain.Event:2"), each other holds a wall time, a step and a Summary of scalar values
// (Summary.Value: tag, simple_value).
//
// SageMaker's TensorBoardOutputConfig uploads the folder while the job runs, and TensorBoard follows a
// growing file, so the file is appended to rather than written under a temporary name and renamed: every
// flush() is one write() of whole records, and a reader that meets a record cut short (the write still
// going on, or a crash) reads it again later or stops there, as it does for TensorFlow's own writer.
#pragma once

#include "common/non_copyable.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace train {

// One serialized Event with the given scalars at `step` (or, with no scalars and a file version, the
// file's first event). Exposed for tests.
std::string encode_scalar_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
std::string encode_file_version_event(double wall_time);
// `data` framed as one TFRecord record.
std::string tfrecord_frame(std::string_view data);

class TensorBoardWriter : private NonCopyable {
 public:
  // Creates `directory` and a new events file in it, and writes the file-version event. Throws
  // std::runtime_error naming the file when it cannot.
  TensorBoardWriter(const std::filesystem::path& directory, const std::string& host);
  ~TensorBoardWriter();

  // Queues one scalar at `step`; scalars of the same step go into one event.
  void scalar(std::string_view tag, int64_t step, double value);
  // Writes what is queued, whole records in one write(). Throws std::runtime_error on a write error.
  void flush();

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::string pending_;  // framed records of the steps already closed
  int64_t step_ = -1;    // the step whose scalars are being collected
  std::vector<std::pair<std::string, float>> scalars_;
  void close_step();
};

}  // namespace train
