#include "runtime/data/record_index.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace train::data {

void CorruptTally::add(const CorruptDataError& error) {
  if (!skip_) throw error;
  ++count_;
  if (notes_.size() < 20) notes_.push_back(fmt::format("{}, byte offset {}: {}", error.file(), error.offset(), error.reason()));
}

namespace {

constexpr char kIndexMagic[8] = {'T', 'R', 'I', 'D', 'X', '0', '0', '1'};

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void put_text(std::string& out, const std::string& text) {
  put<uint64_t>(out, text.size());
  out += text;
}

class IndexBytes {
 public:
  IndexBytes(const std::string& bytes, size_t start) : bytes_(bytes), position_(start) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + position_, sizeof value);
    position_ += sizeof value;
    return value;
  }
  std::string text() {
    const auto size = get<uint64_t>();
    need(size);
    std::string value = bytes_.substr(position_, static_cast<size_t>(size));
    position_ += static_cast<size_t>(size);
    return value;
  }
  uint64_t count(size_t item_bytes) {  // a count of items that must fit in what is left
    const auto n = get<uint64_t>();
    need(n * item_bytes);
    return n;
  }
  bool done() const { return position_ == bytes_.size(); }

 private:
  void need(uint64_t size) const {
    if (size > bytes_.size() - position_) throw DataError("a shared record index is cut short (an internal error: its builder and reader disagree)");
  }
  const std::string& bytes_;  // the caller's: outlives this reader
  size_t position_;
};

}  // namespace

std::string serialize_record_index(const RecordIndex& index) {
  std::string out(kIndexMagic, sizeof kIndexMagic);
  put<uint8_t>(out, index.format == RecordFormat::tfrecord ? 0 : 1);
  put_text(out, index.root);
  put<uint64_t>(out, index.files.size());
  for (const auto& file : index.files) {
    put_text(out, file.path);
    put_text(out, file.name);
  }
  put<uint64_t>(out, index.entries.size());
  for (const auto& entry : index.entries) {
    put(out, entry.file);
    put(out, entry.offset);
    put(out, entry.length);
    put(out, entry.label);
  }
  put<int32_t>(out, index.num_classes);
  put<int64_t>(out, index.corrupt_skipped);
  put<uint64_t>(out, index.corrupt_notes.size());
  for (const auto& note : index.corrupt_notes) put_text(out, note);
  return out;
}

RecordIndex parse_record_index(const std::string& bytes) {
  if (bytes.size() < sizeof kIndexMagic || bytes.compare(0, sizeof kIndexMagic, kIndexMagic, sizeof kIndexMagic) != 0) {
    throw DataError("a shared record index does not start with its magic (an internal error: its builder and reader disagree)");
  }
  IndexBytes in(bytes, sizeof kIndexMagic);
  RecordIndex index;
  index.format = in.get<uint8_t>() == 0 ? RecordFormat::tfrecord : RecordFormat::recordio;
  index.root = in.text();
  const uint64_t files = in.count(16);
  for (uint64_t i = 0; i < files; ++i) {
    RecordFile file;
    file.path = in.text();
    file.name = in.text();
    index.files.push_back(std::move(file));
  }
  const uint64_t entries = in.count(24);
  index.entries.reserve(static_cast<size_t>(entries));
  for (uint64_t i = 0; i < entries; ++i) {
    RecordEntry entry;
    entry.file = in.get<uint32_t>();
    entry.offset = in.get<uint64_t>();
    entry.length = in.get<uint64_t>();
    entry.label = in.get<int32_t>();
    if (entry.file >= index.files.size()) throw DataError("a shared record index names a file it does not list");
    index.entries.push_back(entry);
  }
  index.num_classes = in.get<int32_t>();
  index.corrupt_skipped = in.get<int64_t>();
  const uint64_t notes = in.count(8);
  for (uint64_t i = 0; i < notes; ++i) index.corrupt_notes.push_back(in.text());
  if (!in.done()) throw DataError("a shared record index has bytes after its end (its builder and reader disagree)");
  return index;
}

TempFolder::TempFolder() {
  // TMPDIR decides where (it should be a local disk with room for the inflated shards).
  std::string pattern = (std::filesystem::temp_directory_path() / "train-records-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw DataError(fmt::format("cannot create a temporary folder {} for inflated gzip shards; set TMPDIR to a "
                                "writable folder with room for them",
                                pattern));
  }
  path_ = pattern;
}

TempFolder::~TempFolder() {
  std::error_code error;
  std::filesystem::remove_all(path_, error);
}

}  // namespace train::data
