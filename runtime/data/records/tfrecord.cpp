#include "runtime/data/records/tfrecord.h"

#include "common/ordered_parallel_for.h"
#include "runtime/data/data_error.h"
#include "runtime/data/records/crc32c.h"
#include "runtime/data/records/protobuf_reader.h"
#include "runtime/data/records/tf_example.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

namespace train::data {

namespace {

uint64_t load_le64(const uint8_t* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | p[i];
  return value;
}

uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

std::string checksum_mismatch(const char* what, uint32_t stored, uint32_t computed) {
  return fmt::format("the {} checksum does not match (stored masked CRC-32C {:08x}, computed {:08x})", what, stored, computed);
}

}  // namespace

bool looks_like_tfrecord(const uint8_t* header, size_t size) {
  return size >= kTfRecordHeaderBytes && masked_crc32c(header, 8) == load_le32(header + 8);
}

bool TfRecordReader::next(std::vector<uint8_t>& data, uint64_t& offset) {
  if (!can_continue_) return false;
  offset = stream_.offset();
  uint8_t header[kTfRecordHeaderBytes];
  const size_t got = stream_.read_fully(header, sizeof header);
  if (got == 0) return false;
  can_continue_ = false;  // until the record is read through
  if (got < sizeof header) {
    throw CorruptDataError(stream_.name(), offset,
                           fmt::format("the file ends inside a record header (expected 12 bytes, found {}): it is truncated", got));
  }
  const uint64_t length = load_le64(header);
  const uint32_t stored = load_le32(header + 8);
  const uint32_t computed = masked_crc32c(header, 8);
  if (stored != computed) {
    throw CorruptDataError(stream_.name(), offset,
                           checksum_mismatch("record length's", stored, computed) +
                               "; the framing is lost, the rest of this file cannot be read");
  }
  if (length > kMaxTfRecordBytes) {
    throw CorruptDataError(stream_.name(), offset, fmt::format("a record length of {} bytes (at most {} expected)", length, kMaxTfRecordBytes));
  }
  if (auto size = stream_.size(); size && length + kTfRecordFooterBytes > *size - stream_.offset()) {
    throw CorruptDataError(stream_.name(), offset,
                           fmt::format("the record claims {} bytes but the file ends {} bytes later: it is truncated",
                                       length + kTfRecordFooterBytes, *size - stream_.offset()));
  }
  data.clear();
  uint8_t footer[kTfRecordFooterBytes];
  if (!stream_.append_exactly(data, length) || stream_.read_fully(footer, sizeof footer) != sizeof footer) {
    throw CorruptDataError(stream_.name(), offset,
                           fmt::format("the stream ends inside a record of {} bytes: it is truncated", length));
  }
  can_continue_ = true;  // whatever the data's checksum says, the next record starts here
  const uint32_t stored_data = load_le32(footer);
  const uint32_t computed_data = masked_crc32c(data.data(), data.size());
  if (stored_data != computed_data) throw CorruptDataError(stream_.name(), offset, checksum_mismatch("record data's", stored_data, computed_data));
  return true;
}

std::pair<const uint8_t*, size_t> check_tfrecord(const uint8_t* record, size_t size, const std::string& name,
                                                 uint64_t offset) {
  if (size < kTfRecordHeaderBytes + kTfRecordFooterBytes) {
    throw CorruptDataError(name, offset, fmt::format("a record of {} bytes is shorter than its framing (16 bytes)", size));
  }
  const uint64_t length = load_le64(record);
  if (masked_crc32c(record, 8) != load_le32(record + 8)) {
    throw CorruptDataError(name, offset, checksum_mismatch("record length's", load_le32(record + 8), masked_crc32c(record, 8)));
  }
  if (length != size - kTfRecordHeaderBytes - kTfRecordFooterBytes) {
    throw CorruptDataError(name, offset, fmt::format("the record's length is {} bytes, but {} were indexed (the file changed)",
                                                     length, size - kTfRecordHeaderBytes - kTfRecordFooterBytes));
  }
  const uint8_t* data = record + kTfRecordHeaderBytes;
  const uint32_t stored = load_le32(data + length);
  const uint32_t computed = masked_crc32c(data, static_cast<size_t>(length));
  if (stored != computed) throw CorruptDataError(name, offset, checksum_mismatch("record data's", stored, computed));
  return {data, static_cast<size_t>(length)};
}

void index_tfrecord_stream(ByteStream& stream, uint32_t file, const TfRecordOptions& options,
                           std::vector<RecordEntry>& entries, CorruptTally& tally) {
  TfRecordReader reader(stream);
  std::vector<uint8_t> data;
  for (;;) {
    uint64_t offset = 0;
    try {
      if (!reader.next(data, offset)) return;
      ExampleImage example;
      try {
        example = parse_example_image(data.data(), data.size());
      } catch (const ProtobufError& error) {
        throw CorruptDataError(stream.name(), offset,
                               fmt::format("not a usable tf.train.Example: {} (at byte {} of the record's data)",
                                           error.what(), error.offset()));
      }
      const int64_t label = example.label - options.label_offset;
      if (example.label < options.label_offset) {
        throw DataError(fmt::format(
            "{}, byte offset {}: image/class/label is {}, below the hyperparameter tfrecord_label_offset={} that is "
            "subtracted from every label; for 0-based labels set tfrecord_label_offset=0",
            stream.name(), offset, example.label, options.label_offset));
      }
      if (label > INT32_MAX - 1) {
        throw CorruptDataError(stream.name(), offset, fmt::format("image/class/label {} is too large for a class number", example.label));
      }
      entries.push_back(RecordEntry{file, offset, kTfRecordHeaderBytes + data.size() + kTfRecordFooterBytes,
                                    static_cast<int32_t>(label)});
    } catch (const CorruptDataError& error) {
      tally.add(error);
      if (!reader.can_continue()) return;
    }
  }
}

namespace {

// A failed write of the inflated copy (throw_data_file_error: the machine's fault or the data's).
[[noreturn]] void inflating_failed(const std::string& target, const std::string& path, int error) {
  throw_data_file_error(fmt::format("cannot write {} (inflating {}): {}; set TMPDIR to a writable folder with room "
                                    "for an uncompressed copy of every gzip shard",
                                    target, path, std::strerror(error)),
                        error);
}

// Inflates `path` into `target`; a damaged or truncated gzip stream keeps what was inflated before it.
void inflate_file(const std::string& path, const std::string& target, CorruptTally& tally) {
  GzipStream gzip(std::make_unique<FileStream>(path));
  std::FILE* out = std::fopen(target.c_str(), "wb");
  if (out == nullptr) inflating_failed(target, path, errno);
  std::vector<uint8_t> buffer(size_t{1} << 20);
  try {
    for (;;) {
      const size_t got = gzip.read(buffer.data(), buffer.size());
      if (got == 0) break;
      if (std::fwrite(buffer.data(), 1, got, out) != got) inflating_failed(target, path, errno);
    }
  } catch (const CorruptDataError& error) {
    std::fclose(out);
    tally.add(error);
    return;
  } catch (...) {
    std::fclose(out);
    throw;
  }
  if (std::fclose(out) != 0) inflating_failed(target, path, errno);
}

}  // namespace

RecordIndex index_tfrecord_files(const std::string& root, const std::vector<std::string>& paths,
                                 const TfRecordOptions& options, bool skip_corrupt) {
  RecordIndex index;
  index.format = RecordFormat::tfrecord;
  index.root = root;
  // Each file on its own (a few at once: 1,024 shards of ImageNet are a gigabyte to read and check), then
  // put together in file order: the same entries, corrupt-record notes and first failure as one by one.
  struct Shard {
    RecordFile file;
    std::vector<RecordEntry> entries;
    CorruptTally tally;
  };
  std::vector<Shard> shards(paths.size(), Shard{{}, {}, CorruptTally(skip_corrupt)});
  std::mutex making_temp_folder;
  ordered_parallel_for(paths.size(), 8, [&](size_t f) {
    Shard& shard = shards[f];
    const std::string& path = paths[f];
    shard.file = RecordFile{path, path};
    {
      FileStream probe(path);
      uint8_t magic[2];
      if (looks_gzipped(magic, probe.read_fully(magic, 2))) {
        std::shared_ptr<TempFolder> folder;
        {
          const std::lock_guard<std::mutex> lock(making_temp_folder);
          if (!index.inflated) index.inflated = std::make_shared<TempFolder>();
          folder = index.inflated;
        }
        shard.file.path = (folder->path() / fmt::format("{}.tfrecord", f)).string();
        shard.file.name = path + " (uncompressed)";
        shard.file.temporary = true;
        inflate_file(path, shard.file.path, shard.tally);
      }
    }
    FileStream stream(shard.file.path, shard.file.name);
    index_tfrecord_stream(stream, static_cast<uint32_t>(f), options, shard.entries, shard.tally);
  });
  size_t total = 0;
  for (const auto& shard : shards) total += shard.entries.size();
  index.entries.reserve(total);
  CorruptTally tally(skip_corrupt);
  for (auto& shard : shards) {
    index.files.push_back(std::move(shard.file));
    index.entries.insert(index.entries.end(), shard.entries.begin(), shard.entries.end());
    std::vector<RecordEntry>().swap(shard.entries);
    tally.add_all(shard.tally);
  }
  for (const auto& entry : index.entries) index.num_classes = std::max(index.num_classes, entry.label + 1);
  index.corrupt_skipped = tally.count();
  index.corrupt_notes = tally.notes();
  return index;
}

}  // namespace train::data
