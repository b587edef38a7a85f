#include "runtime/data/records/byte_stream.h"

#include "common/regular_file.h"
#include "runtime/data/data_error.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace train::data {

namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

std::string errno_text(int error) { return std::strerror(error); }

// A regular file's descriptor (common/regular_file.h: a FIFO, a device or a directory in its place is refused
// before a byte is read). Sets `size`.
int open_for_reading(const std::string& path, uint64_t& size) {
  RegularFile file = open_regular_file(path);
  if (!file.ok()) throw DataError(fmt::format("{}: {}", path, file.problem()));
  size = file.size;
  return file.fd;
}

}  // namespace

uint64_t ByteStream::skip(uint64_t size) {
  uint8_t scratch[4096];
  uint64_t skipped = 0;
  while (skipped < size) {
    const size_t got = read(scratch, static_cast<size_t>(std::min<uint64_t>(sizeof scratch, size - skipped)));
    if (got == 0) break;
    skipped += got;
  }
  return skipped;
}

size_t ByteStream::read_fully(uint8_t* out, size_t size) {
  size_t total = 0;
  while (total < size) {
    const size_t got = read(out + total, size - total);
    if (got == 0) break;
    total += got;
  }
  return total;
}

bool ByteStream::append_exactly(std::vector<uint8_t>& bytes, uint64_t size) {
  constexpr uint64_t kChunk = uint64_t{16} << 20;
  while (size > 0) {
    const size_t step = static_cast<size_t>(std::min(size, kChunk));
    const size_t before = bytes.size();
    bytes.resize(before + step);
    const size_t got = read_fully(bytes.data() + before, step);
    bytes.resize(before + got);
    if (got != step) return false;
    size -= step;
  }
  return true;
}

FileStream::FileStream(const std::string& path, std::string name)
    : ByteStream(name.empty() ? path : std::move(name)) {
  fd_ = open_for_reading(path, size_);
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);  // a hint only: failure changes nothing
  buffer_.resize(kBufferBytes);
}

FileStream::~FileStream() {
  if (fd_ >= 0) ::close(fd_);
}

size_t FileStream::read(uint8_t* out, size_t size) {
  if (begin_ == end_) {
    if (size >= buffer_.size()) {  // large reads go straight to the caller's memory
      for (;;) {
        const ssize_t got = ::pread(fd_, out, size, static_cast<off_t>(file_position_));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) throw DataError(fmt::format("{}: read failed at byte offset {}: {}", name(), file_position_, errno_text(errno)));
        file_position_ += static_cast<uint64_t>(got);
        offset_ += static_cast<uint64_t>(got);
        return static_cast<size_t>(got);
      }
    }
    // After a seek the next refill is small, then doubles while reading stays sequential: a scan that reads
    // headers and skips payloads reads little more than the headers, and a plain front-to-back read soon
    // uses the whole buffer.
    const size_t want = std::min(buffer_.size(), refill_bytes_);
    refill_bytes_ = std::min(buffer_.size(), refill_bytes_ * 2);
    for (;;) {
      const ssize_t got = ::pread(fd_, buffer_.data(), want, static_cast<off_t>(file_position_));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw DataError(fmt::format("{}: read failed at byte offset {}: {}", name(), file_position_, errno_text(errno)));
      file_position_ += static_cast<uint64_t>(got);
      begin_ = 0;
      end_ = static_cast<size_t>(got);
      break;
    }
    if (end_ == 0) return 0;
  }
  const size_t n = std::min(size, end_ - begin_);
  std::memcpy(out, buffer_.data() + begin_, n);
  begin_ += n;
  offset_ += n;
  return n;
}

uint64_t FileStream::skip(uint64_t size) {
  const uint64_t buffered = end_ - begin_;
  if (size <= buffered) {
    begin_ += static_cast<size_t>(size);
    offset_ += size;
    return size;
  }
  const uint64_t target = std::min<uint64_t>(offset_ + size, size_);
  const uint64_t skipped = target - offset_;
  seek(target);
  return skipped;
}

void FileStream::seek(uint64_t offset) {
  const uint64_t buffer_start = file_position_ - end_;
  if (offset >= buffer_start && offset <= file_position_) {  // still in the buffer: no re-read
    begin_ = static_cast<size_t>(offset - buffer_start);
    offset_ = offset;
    return;
  }
  begin_ = end_ = 0;
  file_position_ = offset;
  offset_ = offset;
  refill_bytes_ = kSmallRefill;
}

MemoryStream::MemoryStream(const uint8_t* data, size_t size, std::string name, uint64_t base_offset)
    : ByteStream(std::move(name)), data_(data), size_(size), base_(base_offset) {
  offset_ = base_offset;
}

size_t MemoryStream::read(uint8_t* out, size_t size) {
  const size_t n = std::min(size, size_ - position_);
  if (n > 0) std::memcpy(out, data_ + position_, n);
  position_ += n;
  offset_ += n;
  return n;
}

uint64_t MemoryStream::skip(uint64_t size) {
  const uint64_t n = std::min<uint64_t>(size, size_ - position_);
  position_ += static_cast<size_t>(n);
  offset_ += n;
  return n;
}

struct GzipStream::Impl {
  std::unique_ptr<ByteStream> source;
  z_stream z{};
  std::vector<uint8_t> input = std::vector<uint8_t>(size_t{1} << 18);
  bool member_done = false;  // the last member ended; more input means another member
  bool finished = false;
  bool truncated = false;  // the compressed data ended inside a member
};

GzipStream::GzipStream(std::unique_ptr<ByteStream> compressed)
    : ByteStream(compressed->name()), impl_(std::make_unique<Impl>()) {
  impl_->source = std::move(compressed);
  // 15 + 32: the largest window, and zlib detects gzip or zlib headers by itself.
  if (inflateInit2(&impl_->z, 15 + 32) != Z_OK) throw DataError(fmt::format("{}: cannot start zlib", name()));
}

GzipStream::~GzipStream() { inflateEnd(&impl_->z); }

size_t GzipStream::read(uint8_t* out, size_t size) {
  Impl& s = *impl_;
  if (s.truncated) {
    throw CorruptDataError(name(), s.source->offset(),
                           "the gzip stream ends early (expected more compressed data: the file is truncated)");
  }
  if (s.finished || size == 0) return 0;
  s.z.next_out = out;
  s.z.avail_out = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
  while (s.z.avail_out > 0) {
    if (s.z.avail_in == 0) {
      const size_t got = s.source->read(s.input.data(), s.input.size());
      if (got == 0) {
        if (!s.member_done) {
          const bool produced_some = s.z.avail_out < size;
          s.truncated = true;
          if (produced_some) break;  // hand out what was inflated; the next read reports the truncation
          throw CorruptDataError(name(), s.source->offset(),
                                 "the gzip stream ends early (expected more compressed data: the file is truncated)");
        }
        s.finished = true;
        break;
      }
      s.z.next_in = s.input.data();
      s.z.avail_in = static_cast<uInt>(got);
    }
    if (s.member_done) {  // another gzip member follows the one that ended
      inflateReset(&s.z);
      s.member_done = false;
    }
    const int status = inflate(&s.z, Z_NO_FLUSH);
    if (status == Z_STREAM_END) {
      s.member_done = true;
    } else if (status != Z_OK && status != Z_BUF_ERROR) {
      throw CorruptDataError(name(), s.source->offset() - s.z.avail_in,
                             fmt::format("damaged gzip data ({}); expected a valid gzip stream",
                                         s.z.msg != nullptr ? s.z.msg : "zlib error " + std::to_string(status)));
    }
  }
  const size_t produced = size - s.z.avail_out;
  offset_ += produced;
  return produced;
}

bool looks_gzipped(const uint8_t* data, size_t size) { return size >= 2 && data[0] == 0x1f && data[1] == 0x8b; }

std::unique_ptr<ByteStream> open_maybe_gzipped(const std::string& path) {
  auto file = std::make_unique<FileStream>(path);
  uint8_t magic[2];
  const size_t got = file->read_fully(magic, 2);
  file->seek(0);
  if (looks_gzipped(magic, got)) return std::make_unique<GzipStream>(std::move(file));
  return file;
}

void read_fd_range(int fd, uint64_t offset, uint64_t size, std::vector<uint8_t>& bytes, const std::string& name) {
  bytes.resize(static_cast<size_t>(size));
  uint64_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, bytes.data() + done, static_cast<size_t>(size - done), static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int error = errno;
      if (got == 0) {
        throw CorruptDataError(name, offset, fmt::format("expected a record of {} bytes here, but the file ends after {} "
                                                         "(it changed or was truncated since it was indexed)",
                                                         size, done));
      }
      throw DataError(fmt::format("{}: read failed at byte offset {}: {}", name, offset + done, errno_text(error)));
    }
    done += static_cast<uint64_t>(got);
  }
}

void read_file_range(const std::string& path, uint64_t offset, uint64_t size, std::vector<uint8_t>& bytes,
                     const std::string& name) {
  uint64_t file_size = 0;
  const int fd = open_for_reading(path, file_size);
  try {
    read_fd_range(fd, offset, size, bytes, name);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

}  // namespace train::data
