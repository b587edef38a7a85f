// Sequential byte sources for the record readers: a file (buffered, seekable), a span of memory, and a
// gzip/zlib stream over another source. The readers only ever call read() and skip(), so the same code
// can scan a file once at start-up, parse a record already in memory, or (later) consume a Pipe-mode FIFO.
#pragma once

#include "common/non_copyable.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace train::data {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Reads up to `size` bytes into `out`; returns how many (0 only at the end). Throws DataError on an
  // I/O error (or, for gzip, CorruptDataError on damaged compressed data).
  virtual size_t read(uint8_t* out, size_t size) = 0;
  // Skips up to `size` bytes; returns how many were skipped (fewer only at the end).
  virtual uint64_t skip(uint64_t size);
  // Bytes delivered or skipped so far: the offset of the next byte in the (uncompressed) stream.
  uint64_t offset() const { return offset_; }
  // Total size when known in advance (a plain file), for early "runs past the end" checks.
  virtual std::optional<uint64_t> size() const { return std::nullopt; }
  // What error messages call the stream (its file path).
  const std::string& name() const { return name_; }

  // Reads until `size` bytes or the end; returns how many.
  size_t read_fully(uint8_t* out, size_t size);
  // Appends `size` bytes to `bytes`, growing it a chunk at a time so that a damaged length field in a
  // stream of unknown size cannot allocate more than the stream holds; false when the stream ends first.
  bool append_exactly(std::vector<uint8_t>& bytes, uint64_t size);

 protected:
  explicit ByteStream(std::string name) : name_(std::move(name)) {}
  uint64_t offset_ = 0;

 private:
  std::string name_;
};

// A regular file read front to back through a 1 MiB buffer (and the kernel told so, which is what
// FastFile mode's lazily streamed files want); skip() seeks instead of reading.
class FileStream : public ByteStream, private NonCopyable {
 public:
  explicit FileStream(const std::string& path, std::string name = {});
  ~FileStream() override;
  size_t read(uint8_t* out, size_t size) override;
  uint64_t skip(uint64_t size) override;
  std::optional<uint64_t> size() const override { return size_; }
  // Continues reading at `offset` (forwards or backwards).
  void seek(uint64_t offset);

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t file_position_ = 0;  // where the next refill reads
  static constexpr size_t kSmallRefill = size_t{16} << 10;
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0, end_ = 0;  // unread bytes of buffer_
  size_t refill_bytes_ = kSmallRefill;
};

class MemoryStream : public ByteStream {
 public:
  MemoryStream(const uint8_t* data, size_t size, std::string name, uint64_t base_offset = 0);
  size_t read(uint8_t* out, size_t size) override;
  uint64_t skip(uint64_t size) override;
  std::optional<uint64_t> size() const override { return base_ + size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
  uint64_t base_;
};

// Inflates a gzip (or zlib) stream, including several gzip members one after another (what `cat a.gz
// b.gz` and parallel compressors produce). Damaged compressed data throws CorruptDataError naming the
// compressed offset.
class GzipStream : public ByteStream, private NonCopyable {
 public:
  explicit GzipStream(std::unique_ptr<ByteStream> compressed);
  ~GzipStream() override;
  size_t read(uint8_t* out, size_t size) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True when the bytes start with the gzip magic (1f 8b).
bool looks_gzipped(const uint8_t* data, size_t size);

// Opens `path` for sequential reading, inflating it when its content is gzip.
std::unique_ptr<ByteStream> open_maybe_gzipped(const std::string& path);

// pread()s exactly [offset, offset + size) of `path` into `bytes`. Throws DataError naming the file when
// it cannot be opened or read, and CorruptDataError when the file ends before offset + size.
void read_file_range(const std::string& path, uint64_t offset, uint64_t size, std::vector<uint8_t>& bytes,
                     const std::string& name);
// The same from an open descriptor (of a file that may no longer have a name).
void read_fd_range(int fd, uint64_t offset, uint64_t size, std::vector<uint8_t>& bytes, const std::string& name);

}  // namespace train::data
