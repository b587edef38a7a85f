#include "runtime/data/records/recordio.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>

namespace train::data {

namespace {

constexpr uint32_t kLengthMask = (1u << 29) - 1;
// The index scan keeps this much of each record: the header plus a label array of up to 1018 floats.
constexpr size_t kScanKeepBytes = 4096;

uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

uint64_t padded(uint64_t length) { return (length + 3) / 4 * 4; }

}  // namespace

bool RecordIoReader::read_part_header(PartHeader& header) {
  if (pending_) {
    header = *pending_;
    pending_.reset();
    return true;
  }
  header.offset = stream_.offset();
  uint8_t bytes[8];
  const size_t got = stream_.read_fully(bytes, sizeof bytes);
  if (got == 0) return false;
  if (got < sizeof bytes) {
    lost_ = true;
    throw CorruptDataError(stream_.name(), header.offset,
                           fmt::format("the file ends inside a RecordIO part header (expected 8 bytes, found {}): it is truncated", got));
  }
  const uint32_t magic = load_le32(bytes);
  if (magic != kRecordIoMagic) {
    lost_ = true;
    throw CorruptDataError(stream_.name(), header.offset,
                           fmt::format("expected the RecordIO magic number 0xced7230a, found 0x{:08x}", magic));
  }
  const uint32_t lrecord = load_le32(bytes + 4);
  header.cflag = lrecord >> 29;
  header.length = lrecord & kLengthMask;
  if (header.cflag > 3) {
    throw CorruptDataError(stream_.name(), header.offset,
                           fmt::format("continuation flag {} (expected 0 to 3)", header.cflag));
  }
  return true;
}

bool RecordIoReader::next(std::vector<uint8_t>& data, uint64_t& offset, size_t keep_bytes) {
  if (lost_) return false;
  data.clear();
  bool open = false;  // inside a multi-part record
  uint64_t record_size = 0;
  for (;;) {
    PartHeader part{};
    if (!read_part_header(part)) {
      if (!open) return false;
      lost_ = true;
      throw CorruptDataError(stream_.name(), offset, "the file ends inside a multi-part record (no last part): it is truncated");
    }
    const bool starts = part.cflag == 0 || part.cflag == 1;
    if (starts && open) {
      pending_ = part;  // the next call starts with it
      throw CorruptDataError(stream_.name(), offset,
                             fmt::format("a multi-part record has no last part (a new record starts at byte {})", part.offset));
    }
    if (!starts && !open) {
      stream_.skip(padded(part.length));
      throw CorruptDataError(stream_.name(), part.offset,
                             fmt::format("a continuation part (flag {}) without the first part of its record", part.cflag));
    }
    if (!open) offset = part.offset;
    if (open && record_size < keep_bytes) {  // the magic that the writer cut the record at
      uint8_t magic[4];
      for (int i = 0; i < 4; ++i) magic[i] = static_cast<uint8_t>(kRecordIoMagic >> (8 * i));
      const size_t n = static_cast<size_t>(std::min<uint64_t>(4, keep_bytes - record_size));
      data.insert(data.end(), magic, magic + n);
    }
    if (open) record_size += 4;
    open = true;
    const uint64_t keep = std::min<uint64_t>(part.length, record_size < keep_bytes ? keep_bytes - record_size : 0);
    if (auto size = stream_.size(); size && part.length > *size - stream_.offset()) {
      lost_ = true;
      throw CorruptDataError(stream_.name(), part.offset,
                             fmt::format("a part of {} bytes runs past the end of the file ({} bytes left): it is truncated",
                                         part.length, *size - stream_.offset()));
    }
    const uint64_t rest = part.length - keep;
    if (!stream_.append_exactly(data, keep) || stream_.skip(rest) != rest) {
      lost_ = true;
      throw CorruptDataError(stream_.name(), part.offset, fmt::format("the file ends inside a part of {} bytes: it is truncated", part.length));
    }
    stream_.skip(padded(part.length) - part.length);  // the last part's padding may be missing at the end
    record_size += part.length;
    if (part.cflag == 0 || part.cflag == 3) return true;
  }
}

bool RecordIoReader::resync() {
  pending_.reset();
  const uint64_t misalignment = stream_.offset() % 4;
  if (misalignment != 0 && stream_.skip(4 - misalignment) != 4 - misalignment) return false;
  uint8_t word[4];
  for (;;) {
    const uint64_t at = stream_.offset();
    if (stream_.read_fully(word, 4) != 4) return false;
    if (load_le32(word) != kRecordIoMagic) continue;
    if (stream_.read_fully(word, 4) != 4) return false;
    const uint32_t lrecord = load_le32(word);
    const uint32_t cflag = lrecord >> 29;
    if (cflag == 0 || cflag == 1) {
      pending_ = PartHeader{at, cflag, lrecord & kLengthMask};
      lost_ = false;
      return true;
    }
  }
}

RecordIoImage parse_recordio_image(const uint8_t* data, size_t size, const std::string& name, uint64_t offset) {
  if (size < kImageRecordHeaderBytes) {
    throw CorruptDataError(name, offset,
                           fmt::format("a RecordIO image record of {} bytes is shorter than its 24-byte header", size));
  }
  RecordIoImage image;
  image.flag = load_le32(data);
  const uint32_t label_bits = load_le32(data + 4);
  std::memcpy(&image.label, &label_bits, 4);
  size_t header = kImageRecordHeaderBytes;
  if (image.flag > 0) {
    if (image.flag > (size - kImageRecordHeaderBytes) / 4) {
      throw CorruptDataError(name, offset,
                             fmt::format("the header announces a label array of {} floats but the record has {} bytes "
                                         "after its header",
                                         image.flag, size - kImageRecordHeaderBytes));
    }
    const uint32_t first = load_le32(data + kImageRecordHeaderBytes);
    std::memcpy(&image.label, &first, 4);
    header += size_t{image.flag} * 4;
  }
  image.image = data + header;
  image.image_size = size - header;
  return image;
}

int32_t class_from_float_label(double label, const std::string& name, uint64_t offset) {
  if (!std::isfinite(label) || label < 0 || label != std::floor(label)) {
    throw CorruptDataError(name, offset, fmt::format("label {} is not a class number (expected a whole number from 0)", label));
  }
  // Beyond 2^24 a float label no longer holds every whole number, and no model has that many classes.
  if (label > 16777216.0) {
    throw CorruptDataError(name, offset, fmt::format("label {:.0f} is far too large to be a class number; fix the label",
                                                     label));
  }
  return static_cast<int32_t>(label);
}

std::vector<uint64_t> read_recordio_idx(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot open for reading", path));
  // Read whole and cut into lines here: ImageNet's .idx is a million lines, which getline, substr and stoull
  // made slower to read than scanning the .rec itself.
  std::string content;
  for (char chunk[1 << 16]; in.read(chunk, sizeof chunk) || in.gcount() > 0;) content.append(chunk, in.gcount());
  std::vector<uint64_t> offsets;
  const std::string_view all(content);
  for (size_t line_offset = 0; line_offset < all.size();) {
    const size_t end = std::min(all.find('\n', line_offset), all.size());
    std::string_view line = all.substr(line_offset, end - line_offset);
    const uint64_t this_line = line_offset;
    line_offset = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const size_t separator = line.find_first_of(" \t");
    const size_t value =
        separator == std::string_view::npos ? separator : line.find_first_not_of(" \t", separator);
    const std::string_view text = value == std::string_view::npos ? std::string_view() : line.substr(value);
    if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string_view::npos) {
      throw CorruptDataError(path, this_line,
                             fmt::format("expected a line \"key<TAB>offset\" with a whole-number offset, found \"{}\"",
                                         line.substr(0, 80)));
    }
    uint64_t offset = 0;
    for (const char digit : text) offset = offset * 10 + static_cast<uint64_t>(digit - '0');  // 19 digits fit
    offsets.push_back(offset);
  }
  std::sort(offsets.begin(), offsets.end());
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
  return offsets;
}

namespace {

void add_entry(RecordIndex& index, uint32_t file, uint64_t offset, uint64_t end, const std::vector<uint8_t>& kept,
               const std::string& name) {
  const RecordIoImage image = parse_recordio_image(kept.data(), kept.size(), name, offset);
  index.entries.push_back(RecordEntry{file, offset, end - offset, class_from_float_label(image.label, name, offset)});
}

}  // namespace

RecordIndex index_recordio_files(const std::string& root, const std::vector<std::string>& rec_paths,
                                 const std::vector<std::string>& idx_paths, bool skip_corrupt) {
  RecordIndex index;
  index.format = RecordFormat::recordio;
  index.root = root;
  CorruptTally tally(skip_corrupt);
  std::vector<uint8_t> kept;
  for (size_t f = 0; f < rec_paths.size(); ++f) {
    const auto number = static_cast<uint32_t>(index.files.size());
    index.files.push_back(RecordFile{rec_paths[f], rec_paths[f]});
    FileStream stream(rec_paths[f]);
    const std::string& name = rec_paths[f];
    std::optional<std::vector<uint64_t>> offsets;
    if (f < idx_paths.size() && !idx_paths[f].empty()) {
      try {
        offsets = read_recordio_idx(idx_paths[f]);
      } catch (const CorruptDataError& error) {
        tally.add(error);  // an unusable .idx (when skipping): scan the .rec instead
      }
    }
    if (offsets) {
      for (const uint64_t offset : *offsets) {
        try {
          if (offset % 4 != 0 || offset >= *stream.size()) {
            throw CorruptDataError(idx_paths[f], offset,
                                   fmt::format("the .idx lists offset {}, which is not a 4-byte-aligned place inside "
                                               "{} ({} bytes)",
                                               offset, name, *stream.size()));
          }
          stream.seek(offset);
          RecordIoReader reader(stream);
          uint64_t start = 0;
          if (!reader.next(kept, start, kScanKeepBytes)) continue;
          add_entry(index, number, start, stream.offset(), kept, name);
        } catch (const CorruptDataError& error) {
          tally.add(error);
        }
      }
      continue;
    }
    RecordIoReader reader(stream);
    for (;;) {
      uint64_t start = 0;
      try {
        if (!reader.next(kept, start, kScanKeepBytes)) {
          if (!reader.resync()) break;
          continue;
        }
        add_entry(index, number, start, stream.offset(), kept, name);
      } catch (const CorruptDataError& error) {
        tally.add(error);
      }
    }
  }
  index.entries.shrink_to_fit();  // a million entries: the doubling's spare half is ~20 MB per rank
  for (const auto& entry : index.entries) index.num_classes = std::max(index.num_classes, entry.label + 1);
  index.corrupt_skipped = tally.count();
  index.corrupt_notes = tally.notes();
  return index;
}

}  // namespace train::data
