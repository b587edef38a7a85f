#include "runtime/data/sources/record_source.h"

#include "runtime/data/records/byte_stream.h"
#include "runtime/data/records/protobuf_reader.h"
#include "runtime/data/records/recordio.h"
#include "runtime/data/records/tf_example.h"
#include "runtime/data/records/tfrecord.h"

#include <fmt/format.h>

#include <optional>
#include <stdexcept>

namespace train::data {

const char* record_format_name(RecordFormat format) {
  return format == RecordFormat::tfrecord ? "TFRecord" : "RecordIO";
}

RecordSource::RecordSource(RecordIndex index, const ImageFolderOptions& options)
    : SampleSource(options.height, options.width), index_(std::move(index)), options_(options) {
  if (index_.entries.empty()) {
    throw DataError(fmt::format("{} data in {}: no usable records in {} file{}{}", record_format_name(index_.format),
                                index_.root, index_.files.size(), index_.files.size() == 1 ? "" : "s",
                                index_.corrupt_skipped > 0
                                    ? fmt::format(" ({} corrupt ones skipped; the first: {})", index_.corrupt_skipped,
                                                  index_.corrupt_notes.front())
                                    : ""));
  }
}

std::string RecordSource::sample_name(int64_t index) const {
  if (index < 0 || index >= size()) return SampleSource::sample_name(index);
  return index_.record_name(index_.entries[static_cast<size_t>(index)]);
}

std::string RecordSource::describe() const {
  return fmt::format("{} files in {}: {} records in {} files, {} classes, augmentation {}, input {}x{}{}",
                     record_format_name(index_.format), index_.root, index_.size(), index_.files.size(),
                     index_.num_classes, augmentation_name(options_.augmentation), height_, width_,
                     index_.corrupt_skipped > 0 ? fmt::format(", {} corrupt records skipped while indexing",
                                                              index_.corrupt_skipped)
                                                : "");
}

std::pair<const uint8_t*, size_t> RecordSource::unwrap(const RecordEntry& entry, std::vector<uint8_t>& record,
                                                       std::vector<uint8_t>& reassembled) const {
  const RecordFile& file = index_.files[entry.file];
  if (const int fd = index_.held ? index_.held->fd(entry.file) : -1; fd >= 0) {
    read_fd_range(fd, entry.offset, entry.length, record, file.name);  // an inflated copy, perhaps unlinked
  } else {
    read_file_range(file.path, entry.offset, entry.length, record, file.name);
  }
  if (index_.format == RecordFormat::tfrecord) {
    const auto [data, size] = check_tfrecord(record.data(), record.size(), file.name, entry.offset);
    try {
      const ExampleImage example = parse_example_image(data, size);
      return {example.image, example.image_size};
    } catch (const ProtobufError& error) {
      throw CorruptDataError(file.name, entry.offset,
                             fmt::format("not a usable tf.train.Example: {} (at byte {} of the record's data)",
                                         error.what(), error.offset()));
    }
  }
  MemoryStream stream(record.data(), record.size(), file.name, entry.offset);
  RecordIoReader reader(stream);
  uint64_t start = 0;
  if (!reader.next(reassembled, start)) {
    throw CorruptDataError(file.name, entry.offset, "expected a RecordIO record here, found nothing (the file changed)");
  }
  const RecordIoImage image = parse_recordio_image(reassembled.data(), reassembled.size(), file.name, entry.offset);
  return {image.image, image.image_size};
}

int32_t RecordSource::load(int64_t index, uint64_t seed, int64_t epoch, float* out, SampleScratch& scratch) const {
  if (index < 0 || index >= size()) throw std::out_of_range(fmt::format("sample {} of {}", index, size()));
  const RecordEntry& entry = index_.entries[static_cast<size_t>(index)];
  std::optional<StageTimer> reading(std::in_place, scratch.stage_times, SampleStage::read);
  const auto [image, image_size] = unwrap(entry, scratch_bytes(scratch), scratch_spare_bytes(scratch));
  reading.reset();
  Rng rng(sample_key(seed, epoch, index));
  const std::string name = fmt::format("{}, record at byte offset {}", index_.files[entry.file].name, entry.offset);
  decode_augment_normalise(image, image_size, name, options_, rng, scratch, out);
  return entry.label;
}

std::vector<uint8_t> RecordSource::image_bytes(int64_t index) const {
  std::vector<uint8_t> record, reassembled;
  const auto [image, size] = unwrap(index_.entries.at(static_cast<size_t>(index)), record, reassembled);
  return std::vector<uint8_t>(image, image + size);
}

}  // namespace train::data
