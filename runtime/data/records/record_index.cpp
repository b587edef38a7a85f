#include "runtime/data/records/record_index.h"

#include "common/container_bytes.h"
#include "runtime/data/records/index_bytes.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string_view>
#include <unistd.h>
#include <stdexcept>
#include <system_error>

namespace train::data {

void CorruptTally::add(const CorruptDataError& error) {
  if (!skip_) throw error;
  ++count_;
  if (notes_.size() < 20) notes_.push_back(fmt::format("{}, byte offset {}: {}", error.file(), error.offset(), error.reason()));
}

void CorruptTally::add_all(const CorruptTally& later) {
  count_ += later.count_;
  for (const auto& note : later.notes_) {
    if (notes_.size() < 20) notes_.push_back(note);
  }
}

namespace {

constexpr char kIndexMagic[8] = {'T', 'R', 'I', 'D', 'X', '0', '0', '1'};

}  // namespace

std::string serialize_record_index(const RecordIndex& index) {
  std::string out(kIndexMagic, sizeof kIndexMagic);
  out.reserve(out.size() + index.entries.size() * 24 + index.files.size() * 64 + 1024);
  put_value<uint8_t>(out, index.format == RecordFormat::tfrecord ? 0 : 1);
  put_text(out, index.root);
  put_value<uint64_t>(out, index.files.size());
  for (const auto& file : index.files) {
    put_text(out, file.path);
    put_text(out, file.name);
    put_value<uint8_t>(out, file.temporary ? 1 : 0);
  }
  put_value<uint64_t>(out, index.entries.size());
  for (const auto& entry : index.entries) {
    put_value(out, entry.file);
    put_value(out, entry.offset);
    put_value(out, entry.length);
    put_value(out, entry.label);
  }
  put_value<int32_t>(out, index.num_classes);
  put_value<int64_t>(out, index.corrupt_skipped);
  put_value<uint64_t>(out, index.corrupt_notes.size());
  for (const auto& note : index.corrupt_notes) put_text(out, note);
  return out;
}

RecordIndex parse_record_index(const std::string& bytes) {
  if (bytes.size() < sizeof kIndexMagic || bytes.compare(0, sizeof kIndexMagic, kIndexMagic, sizeof kIndexMagic) != 0) {
    throw DataError("a shared record index does not start with its magic (an internal error: its builder and reader disagree)");
  }
  IndexBytes in(bytes, sizeof kIndexMagic, "a shared record index");
  RecordIndex index;
  index.format = in.get<uint8_t>() == 0 ? RecordFormat::tfrecord : RecordFormat::recordio;
  index.root = in.text();
  const uint64_t files = in.count(17);
  for (uint64_t i = 0; i < files; ++i) {
    RecordFile file;
    file.path = in.text();
    file.name = in.text();
    file.temporary = in.get<uint8_t>() != 0;
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

namespace {

constexpr std::string_view temp_folder_prefix = "train-records-";

OwnedFolder make_temp_folder() {
  // TMPDIR decides where (it should be a local disk with room for the inflated shards).
  const std::filesystem::path parent = std::filesystem::temp_directory_path();
  OwnedFolder::remove_stale(parent, temp_folder_prefix);
  try {
    return OwnedFolder(parent, temp_folder_prefix);
  } catch (const std::filesystem::filesystem_error& error) {
    throw_data_file_error(fmt::format("cannot create a temporary folder {} for inflated gzip shards: {}; set TMPDIR "
                                      "to a writable folder with room for them",
                                      error.path1().string(), std::strerror(error.code().value())),
                          error.code().value());
  }
}

}  // namespace

TempFolder::TempFolder() : folder_(make_temp_folder()) {}

HeldFiles::HeldFiles(const std::vector<RecordFile>& files) : fds_(files.size(), -1) {
  for (size_t i = 0; i < files.size(); ++i) {
    if (!files[i].temporary) continue;
    fds_[i] = ::open(files[i].path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fds_[i] < 0) {
      const int error = errno;
      for (int fd : fds_) {
        if (fd >= 0) ::close(fd);
      }
      throw DataError(fmt::format("{}: cannot open its inflated copy {}: {}", files[i].name, files[i].path,
                                  std::strerror(error)));
    }
  }
}

HeldFiles::~HeldFiles() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

int64_t RecordIndex::bytes() const {
  int64_t total = static_cast<int64_t>(sizeof(RecordIndex)) + string_bytes(root) + vector_bytes(files) +
                  vector_bytes(entries) + strings_bytes(corrupt_notes);
  for (const auto& file : files) {
    total += string_bytes(file.path) + string_bytes(file.name) - 2 * static_cast<int64_t>(sizeof(std::string));
  }
  return total;
}

std::string RecordIndex::record_name(const RecordEntry& entry) const {
  return fmt::format("{}, byte offset {}", files[entry.file].name, entry.offset);
}

void hold_temporary_files(RecordIndex& index) {
  if (index.held) return;
  const bool any = std::any_of(index.files.begin(), index.files.end(), [](const RecordFile& f) { return f.temporary; });
  if (any) index.held = std::make_shared<HeldFiles>(index.files);
}

}  // namespace train::data
