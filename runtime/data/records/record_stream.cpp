#include "runtime/data/records/record_stream.h"

#include "runtime/data/records/protobuf_reader.h"
#include "runtime/data/records/recordio.h"
#include "runtime/data/records/tf_example.h"
#include "runtime/data/records/tfrecord.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace train::data {

PrefixedStream::PrefixedStream(std::vector<uint8_t> prefix, std::unique_ptr<ByteStream> rest)
    : ByteStream(rest->name()), prefix_(std::move(prefix)), rest_(std::move(rest)) {}

size_t PrefixedStream::read(uint8_t* out, size_t size) {
  size_t got = 0;
  if (used_ < prefix_.size()) {
    got = std::min(size, prefix_.size() - used_);
    std::memcpy(out, prefix_.data() + used_, got);
    used_ += got;
  }
  if (got < size) got += rest_->read(out + got, size - got);
  offset_ += got;
  return got;
}

struct RecordIoUnwrapStream::Impl {
  std::unique_ptr<ByteStream> wrapped;
  RecordIoReader reader;
  std::vector<uint8_t> payload;
  size_t used = 0;
  explicit Impl(std::unique_ptr<ByteStream> stream) : wrapped(std::move(stream)), reader(*wrapped) {}
};

RecordIoUnwrapStream::RecordIoUnwrapStream(std::unique_ptr<ByteStream> wrapped)
    : ByteStream(wrapped->name() + " (RecordIO-wrapped)"), impl_(std::make_unique<Impl>(std::move(wrapped))) {}

RecordIoUnwrapStream::~RecordIoUnwrapStream() = default;

size_t RecordIoUnwrapStream::read(uint8_t* out, size_t size) {
  size_t got = 0;
  while (got < size) {
    if (impl_->used == impl_->payload.size()) {
      uint64_t offset = 0;
      impl_->used = 0;
      // A damaged wrapper cannot be skipped: the object inside it would lose bytes, so it is thrown.
      if (!impl_->reader.next(impl_->payload, offset)) {
        impl_->payload.clear();
        break;
      }
      continue;
    }
    const size_t take = std::min(size - got, impl_->payload.size() - impl_->used);
    std::memcpy(out + got, impl_->payload.data() + impl_->used, take);
    impl_->used += take;
    got += take;
  }
  offset_ += got;
  return got;
}

struct StreamRecordReader::Readers {
  std::optional<TfRecordReader> tfrecord;
  std::optional<RecordIoReader> recordio;
};

namespace {

// Reads up to `size` bytes without consuming them: they are put back in front of the stream.
std::vector<uint8_t> peek(std::unique_ptr<ByteStream>& stream, size_t size) {
  std::vector<uint8_t> head(size);
  head.resize(stream->read_fully(head.data(), size));
  stream = std::make_unique<PrefixedStream>(head, std::move(stream));
  return head;
}

uint32_t little_endian_u32(const uint8_t* bytes) {
  return uint32_t{bytes[0]} | uint32_t{bytes[1]} << 8 | uint32_t{bytes[2]} << 16 | uint32_t{bytes[3]} << 24;
}

}  // namespace

StreamRecordReader::StreamRecordReader(std::unique_ptr<ByteStream> stream, const StreamRecordOptions& options)
    : stream_(std::move(stream)), options_(options), tally_(options.skip_corrupt), readers_(std::make_unique<Readers>()) {
  if (options_.unwrap_recordio) stream_ = std::make_unique<RecordIoUnwrapStream>(std::move(stream_));
  auto head = peek(stream_, 2);
  if (looks_gzipped(head.data(), head.size())) stream_ = std::make_unique<GzipStream>(std::move(stream_));
  head = peek(stream_, kTfRecordHeaderBytes);
  if (head.empty()) {
    ended_ = true;  // an empty stream: no records
  } else if (options_.format) {
    format_ = *options_.format;
  } else if (head.size() >= 4 && little_endian_u32(head.data()) == kRecordIoMagic) {
    format_ = RecordFormat::recordio;
  } else if (looks_like_tfrecord(head.data(), head.size())) {
    format_ = RecordFormat::tfrecord;
  } else {
    throw DataError(fmt::format(
        "{}: the stream starts with neither a TFRecord record nor the RecordIO magic 0xced7230a (first bytes: {:02x}); "
        "Pipe mode reads TFRecord or MXNet RecordIO objects{}",
        stream_->name(), fmt::join(head, " "),
        options_.unwrap_recordio ? ""
                                 : "; if SageMaker wraps the objects (RecordWrapperType=RecordIO), say so in the channel's "
                                   "configuration"));
  }
  if (format_ == RecordFormat::tfrecord) {
    readers_->tfrecord.emplace(*stream_);
  } else {
    readers_->recordio.emplace(*stream_);
  }
}

StreamRecordReader::~StreamRecordReader() = default;

int32_t StreamRecordReader::checked_label(int64_t label, uint64_t offset) const {
  if (options_.num_classes > 0 && label >= options_.num_classes) {
    throw DataError(fmt::format("{}, byte offset {}: label {} is not below num_classes={}; set the hyperparameter "
                                "num_classes to the number of classes of the data",
                                stream_->name(), offset, label, options_.num_classes));
  }
  return static_cast<int32_t>(label);
}

bool StreamRecordReader::next(StreamRecord& record) {
  if (ended_) return false;
  const bool found = format_ == RecordFormat::tfrecord ? next_tfrecord(record) : next_recordio(record);
  if (!found) ended_ = true;
  return found;
}

// After a corrupt record the readers go on only if they got past it: damage below the record layer (a
// broken gzip stream) fails the same way at the same place forever, so it ends the stream instead.
void StreamRecordReader::skip_or_throw(const CorruptDataError& error, uint64_t offset_before) {
  if (stream_->offset() == offset_before) {
    throw DataError(fmt::format("{}; the stream cannot be read past this point (even with skip_corrupt)", error.what()));
  }
  tally_.add(error);
}

bool StreamRecordReader::next_tfrecord(StreamRecord& record) {
  TfRecordReader& reader = *readers_->tfrecord;
  for (;;) {
    uint64_t offset = 0;
    const uint64_t before = stream_->offset();
    try {
      if (!reader.next(data_, offset)) return false;
      ExampleImage example;
      try {
        example = parse_example_image(data_.data(), data_.size());
      } catch (const ProtobufError& error) {
        throw CorruptDataError(stream_->name(), offset,
                               fmt::format("not a usable tf.train.Example: {} (at byte {} of the record's data)",
                                           error.what(), error.offset()));
      }
      if (example.label < options_.tfrecord_label_offset) {
        throw DataError(fmt::format(
            "{}, byte offset {}: image/class/label is {}, below the hyperparameter tfrecord_label_offset={} that is "
            "subtracted from every label; for 0-based labels set tfrecord_label_offset=0",
            stream_->name(), offset, example.label, options_.tfrecord_label_offset));
      }
      const int64_t label = example.label - options_.tfrecord_label_offset;
      if (label > INT32_MAX - 1) {
        throw CorruptDataError(stream_->name(), offset,
                               fmt::format("image/class/label {} is too large for a class number", example.label));
      }
      record.label = checked_label(label, offset);
      record.image.assign(example.image, example.image + example.image_size);
      record.offset = offset;
      return true;
    } catch (const CorruptDataError& error) {
      if (!reader.can_continue()) {
        throw DataError(fmt::format("{}; the TFRecord framing is lost there, so the rest of the stream cannot be read "
                                    "(even with skip_corrupt)",
                                    error.what()));
      }
      skip_or_throw(error, before);
    }
  }
}

bool StreamRecordReader::next_recordio(StreamRecord& record) {
  RecordIoReader& reader = *readers_->recordio;
  for (;;) {
    uint64_t offset = 0;
    const uint64_t before = stream_->offset();
    try {
      if (!reader.next(data_, offset)) {
        if (!reader.resync()) return false;  // the end, or damage the reader must scan past
        continue;
      }
      const RecordIoImage image = parse_recordio_image(data_.data(), data_.size(), stream_->name(), offset);
      record.label = checked_label(class_from_float_label(image.label, stream_->name(), offset), offset);
      record.image.assign(image.image, image.image + image.image_size);
      record.offset = offset;
      return true;
    } catch (const CorruptDataError& error) {
      skip_or_throw(error, before);
    }
  }
}

}  // namespace train::data
