// Labelled images out of one byte stream of records, front to back: what a Pipe-mode FIFO delivers (the
// channel's S3 objects one after another). The stream is TFRecord (plain or gzip) or MXNet RecordIO,
// detected from its first bytes unless the format is given; with SageMaker's RecordWrapperType=RecordIO
// every object arrives wrapped in RecordIO records, which are unwrapped first. Corrupt records are thrown
// as CorruptDataError, or counted and skipped with skip_corrupt (a TFRecord whose framing is lost ends the
// stream: nothing after it can be found again).
#pragma once

#include "runtime/data/records/byte_stream.h"
#include "runtime/data/records/record_index.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace train::data {

struct StreamRecordOptions {
  std::optional<RecordFormat> format;  // none: detect from the first bytes
  bool unwrap_recordio = false;        // RecordWrapperType=RecordIO
  int64_t tfrecord_label_offset = 1;
  bool skip_corrupt = false;
  int num_classes = 0;                 // labels must be below it (0: unchecked)
};

struct StreamRecord {
  int32_t label = 0;
  std::vector<uint8_t> image;  // the encoded image
  uint64_t offset = 0;         // where the record starts in the (unwrapped, inflated) stream
};

// A stream whose first bytes were already read (to detect its format) and are delivered again.
class PrefixedStream : public ByteStream {
 public:
  PrefixedStream(std::vector<uint8_t> prefix, std::unique_ptr<ByteStream> rest);
  size_t read(uint8_t* out, size_t size) override;

 private:
  std::vector<uint8_t> prefix_;
  size_t used_ = 0;
  std::unique_ptr<ByteStream> rest_;
};

class StreamRecordReader {
 public:
  StreamRecordReader(std::unique_ptr<ByteStream> stream, const StreamRecordOptions& options);
  ~StreamRecordReader();
  // The next usable record; false at the end of the stream. Throws DataError / CorruptDataError.
  bool next(StreamRecord& record);
  RecordFormat format() const { return format_; }
  const CorruptTally& corrupt() const { return tally_; }

 private:
  bool next_tfrecord(StreamRecord& record);
  bool next_recordio(StreamRecord& record);
  // What one try of a format's reader found.
  enum class Read { record, end, again };
  // The loop both formats share: tries `read_one` until it finds a record or the end; a corrupt record is
  // counted and passed over (skip_or_throw) after `on_corrupt` has had its say (it may throw).
  template <typename ReadOne, typename OnCorrupt>
  bool next_whole(const ReadOne& read_one, const OnCorrupt& on_corrupt);
  int32_t checked_label(int64_t label, uint64_t offset) const;
  void skip_or_throw(const CorruptDataError& error, uint64_t offset_before);

  std::unique_ptr<ByteStream> stream_;
  StreamRecordOptions options_;
  RecordFormat format_ = RecordFormat::tfrecord;
  CorruptTally tally_;
  struct Readers;
  std::unique_ptr<Readers> readers_;
  std::vector<uint8_t> data_;
  bool ended_ = false;
};

}  // namespace train::data
