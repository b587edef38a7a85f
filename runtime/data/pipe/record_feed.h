// Records dealt to this rank one after another (Pipe mode) instead of read by index: the batch loader's
// input when the data is a stream. Each epoch's share is read to its end before the next epoch's starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace train::data {

struct FedRecord {
  int64_t index = 0;           // the record's place in its epoch's stream: keys its augmentation
  int32_t label = 0;           // 0-based class
  std::vector<uint8_t> image;  // the encoded image (JPEG or PNG)
  bool repeat = false;         // a padding copy of an earlier record of the epoch (see pipe_dealer.h)
};

class RecordFeed {
 public:
  virtual ~RecordFeed() = default;
  // The next record of this rank's share of `epoch` into `record` (reusing its storage); false when the
  // share has no more records. Throws DataError (a damaged stream, a FIFO that never appears, a reader
  // that went silent for longer than the data timeout) and FeedStopped after stop().
  virtual bool next(int64_t epoch, FedRecord& record) = 0;
  // Makes a waiting or later next() throw FeedStopped soon. Thread-safe.
  virtual void stop() = 0;
  // What messages call this feed ("Pipe-mode channel train").
  virtual std::string describe() const = 0;
};

struct FeedStopped {};

}  // namespace train::data
