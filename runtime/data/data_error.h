// The errors for anything wrong with the training data: a folder without classes, a file that cannot be
// read or decoded, a corrupt record. The message names the path and the reason, and is meant for the user
// as it stands.
#pragma once

#include "common/environment_error.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace train::data {

class DataError : public std::runtime_error {
 public:
  explicit DataError(const std::string& message) : std::runtime_error(message) {}
};

// A file the data needs could not be written or made (`error`: its errno): the machine's fault
// (EnvironmentError) when its disk is full, read-only or forbidden, else the data's.
[[noreturn]] inline void throw_data_file_error(const std::string& message, int error) {
  if (is_environment_errno(error)) throw EnvironmentError(message);
  throw DataError(message);
}

// A bounded wait for data that ran out (a Pipe-mode FIFO that never appeared or stopped streaming, a batch
// that never came): the job ends with the exit code of a wait that ran out, not that of bad data.
class DataTimeout : public DataError {
 public:
  using DataError::DataError;
};

// A record that cannot be used: a bad checksum, a truncated file, a malformed tf.train.Example or
// RecordIO header. It carries where (file and byte offset) and why, so that skip_corrupt can count and
// report it, and the default (failing the job) can say exactly what to fix.
class CorruptDataError : public DataError {
 public:
  CorruptDataError(std::string file, uint64_t offset, std::string reason)
      : DataError(file + ", byte offset " + std::to_string(offset) + ": " + reason +
                  "; replace or re-create the file, or set the hyperparameter skip_corrupt=true to skip corrupt "
                  "records (they are counted and the count is reported every epoch)"),
        file_(std::move(file)),
        offset_(offset),
        reason_(std::move(reason)) {}
  const std::string& file() const { return file_; }
  uint64_t offset() const { return offset_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string file_;
  uint64_t offset_;
  std::string reason_;
};

}  // namespace train::data
