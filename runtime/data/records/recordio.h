// MXNet RecordIO (dmlc-core's format, what im2rec and the built-in image classification algorithm use).
// A record is one or more parts, each
//     uint32 magic 0xced7230a | uint32 lrecord | data | zero padding to a multiple of 4 bytes
// with lrecord = cflag << 29 | data length. cflag 0 is a whole record; a record whose data holds the magic
// at a 4-byte-aligned position is written as parts 1 (first), 2 (middle) ... 3 (last), cut at each such
// magic, which is dropped from the data: reassembly puts it back between parts. An image record's data
// starts with a 24-byte header (uint32 flag, float label, uint64 id, uint64 id2); flag > 0 means a label
// array of `flag` floats follows (and the label field is unused); the encoded image comes after.
// An optional .idx file (lines "key<TAB>offset") gives each record's offset.
#pragma once

#include "runtime/data/records/byte_stream.h"
#include "runtime/data/records/record_index.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace train::data {

inline constexpr uint32_t kRecordIoMagic = 0xced7230a;
inline constexpr size_t kImageRecordHeaderBytes = 24;

class RecordIoReader {
 public:
  explicit RecordIoReader(ByteStream& stream) : stream_(stream) {}
  // The next whole record (parts reassembled) into `data` and its first part's offset into `offset`;
  // false at a clean end. Only the first `keep_bytes` bytes of the data are kept (the rest is skipped
  // without reading when the stream can seek): the index scan needs only the header. Throws
  // CorruptDataError; then resync() finds the next record, if any.
  bool next(std::vector<uint8_t>& data, uint64_t& offset,
            size_t keep_bytes = std::numeric_limits<size_t>::max());
  // Moves to the next 4-byte-aligned magic that starts a record (cflag 0 or 1), as dmlc-core's reader
  // does after damage; false when the stream ends first.
  bool resync();

 private:
  struct PartHeader {
    uint64_t offset;
    uint32_t cflag;
    uint32_t length;
  };
  bool read_part_header(PartHeader& header);  // false at a clean end
  ByteStream& stream_;
  std::optional<PartHeader> pending_;  // a header already read that starts the next record
  bool lost_ = false;                  // a bad magic: only resync() helps
};

struct RecordIoImage {
  uint32_t flag = 0;
  float label = 0;                 // the header's label, or the first of the label array when flag > 0
  const uint8_t* image = nullptr;  // points into the record's data
  size_t image_size = 0;
};

// Parses an image record's header. Throws CorruptDataError (naming `name` and `offset`) when the data is
// shorter than the header and its label array.
RecordIoImage parse_recordio_image(const uint8_t* data, size_t size, const std::string& name, uint64_t offset);

// The class of a RecordIO or .lst label: a whole number from 0; else CorruptDataError.
int32_t class_from_float_label(double label, const std::string& name, uint64_t offset);

// Reads a .idx file: the records' offsets, sorted and without duplicates. Throws CorruptDataError for a
// line that is not "key<TAB>offset".
std::vector<uint64_t> read_recordio_idx(const std::string& path);

// Indexes .rec files (sorted): each with its .idx when `idx_paths[i]` is not empty (then only the listed
// records, each checked where it starts), else by a sequential scan of the part headers that skips the
// image bytes. Either way records come in file order.
RecordIndex index_recordio_files(const std::string& root, const std::vector<std::string>& rec_paths,
                                 const std::vector<std::string>& idx_paths, bool skip_corrupt);

}  // namespace train::data
