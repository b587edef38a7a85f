// A Pipe-mode FIFO (/opt/ml/input/data/<channel>_<epoch>) as a ByteStream. SageMaker may create the FIFO
// late and may pause while it fetches from S3, so both the wait for the FIFO to appear and every wait for
// bytes are bounded: past the timeout a DataError says which FIFO and how long. A regular file at the
// path is read the same way (handy for rehearsing Pipe mode by hand).
#pragma once

#include "common/non_copyable.h"
#include "runtime/data/records/byte_stream.h"

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace train::data {

class FifoStream : public ByteStream, private NonCopyable {
 public:
  // Waits for `path` to exist and opens it. Every wait is cut into short slices that throw FeedStopped
  // once `*stop` is set (`stop` may be null).
  FifoStream(const std::string& path, std::chrono::milliseconds timeout, const std::atomic<bool>* stop);
  ~FifoStream() override;
  size_t read(uint8_t* out, size_t size) override;

 private:
  bool refill();  // false at the end (the writer closed the FIFO)
  void check_stop() const;

  int fd_ = -1;
  std::chrono::milliseconds timeout_;
  const std::atomic<bool>* stop_;
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0, end_ = 0;
  bool ended_ = false;
};

}  // namespace train::data
