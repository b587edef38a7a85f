// TFRecord framing: each record is
//     uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | length bytes of data |
//     uint32 masked CRC-32C of the data
// and a file is records back to back (optionally the whole file gzip-compressed). Both checksums are
// checked. The reader consumes a ByteStream front to back, so it serves the start-up index scan of a
// file and could serve a Pipe-mode stream alike.
#pragma once

#include "runtime/data/records/byte_stream.h"
#include "runtime/data/records/record_index.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace train::data {

inline constexpr size_t kTfRecordHeaderBytes = 12;   // length + its CRC
inline constexpr size_t kTfRecordFooterBytes = 4;    // data CRC
inline constexpr uint64_t kMaxTfRecordBytes = uint64_t{1} << 30;  // larger lengths are taken as corruption

// True when `header` (at least 12 bytes) starts a TFRecord: its length's checksum matches.
bool looks_like_tfrecord(const uint8_t* header, size_t size);

class TfRecordReader {
 public:
  explicit TfRecordReader(ByteStream& stream) : stream_(stream) {}
  // The next record's data into `data` and its framing's offset into `offset`; false at a clean end.
  // Throws CorruptDataError; afterwards can_continue() says whether the framing is intact (a bad data
  // checksum) or lost (a bad length checksum, a truncated record): then the rest of the stream is unusable.
  bool next(std::vector<uint8_t>& data, uint64_t& offset);
  bool can_continue() const { return can_continue_; }

 private:
  ByteStream& stream_;
  bool can_continue_ = true;
};

// Checks one whole record held in memory (framing included) and returns its data. Throws
// CorruptDataError naming `name` and the record's `offset`.
std::pair<const uint8_t*, size_t> check_tfrecord(const uint8_t* record, size_t size, const std::string& name,
                                                 uint64_t offset);

struct TfRecordOptions {
  int64_t label_offset = 1;  // subtracted from image/class/label (1-based in the usual ImageNet scripts)
};

// Indexes every record of one (uncompressed) stream: checks both checksums, parses the Example for its
// label, appends entries for file `file`. Corrupt records go to `tally` (which throws unless skipping).
// A label below label_offset throws DataError whatever skip_corrupt says: it is a setting to fix, not
// a damaged record.
void index_tfrecord_stream(ByteStream& stream, uint32_t file, const TfRecordOptions& options,
                           std::vector<RecordEntry>& entries, CorruptTally& tally);

// The files (sorted) of a TFRecord data set into an index; gzip shards are inflated into
// `index.inflated` first. Reads every file front to back once.
RecordIndex index_tfrecord_files(const std::string& root, const std::vector<std::string>& paths,
                                 const TfRecordOptions& options, bool skip_corrupt);

}  // namespace train::data
