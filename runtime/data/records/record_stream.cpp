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

struct StreamRecordReader::Readers {
  std::optional<TfRecordReader> tfrecord;
  std::optional<RecordIoReader> recordio;
};

namespace {

// The payloads of a stream of RecordIO records, back to back (SageMaker's RecordWrapperType=RecordIO).
class RecordIoUnwrapStream : public ByteStream {
 public:
  explicit RecordIoUnwrapStream(std::unique_ptr<ByteStream> wrapped)
      : ByteStream(wrapped->name() + " (RecordIO-wrapped)"), wrapped_(std::move(wrapped)), reader_(*wrapped_) {}

  size_t read(uint8_t* out, size_t size) override {
    size_t got = 0;
    while (got < size) {
      if (used_ == payload_.size()) {
        uint64_t offset = 0;
        used_ = 0;
        // A damaged wrapper cannot be skipped: the object inside it would lose bytes, so it is thrown.
        if (!reader_.next(payload_, offset)) {
          payload_.clear();
          break;
        }
        continue;
      }
      const size_t take = std::min(size - got, payload_.size() - used_);
      std::memcpy(out + got, payload_.data() + used_, take);
      used_ += take;
      got += take;
    }
    offset_ += got;
    return got;
  }

 private:
  std::unique_ptr<ByteStream> wrapped_;
  RecordIoReader reader_;  // reads wrapped_, so it is declared (and made) after it
  std::vector<uint8_t> payload_;
  size_t used_ = 0;
};

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

template <typename ReadOne, typename OnCorrupt>
bool StreamRecordReader::next_whole(const ReadOne& read_one, const OnCorrupt& on_corrupt) {
  for (;;) {
    const uint64_t before = stream_->offset();
    try {
      const Read read = read_one();
      if (read != Read::again) return read == Read::record;
    } catch (const CorruptDataError& error) {
      on_corrupt(error);
      skip_or_throw(error, before);
    }
  }
}

bool StreamRecordReader::next_tfrecord(StreamRecord& record) {
  TfRecordReader& reader = *readers_->tfrecord;
  const auto read_one = [&] {
    uint64_t offset = 0;
    if (!reader.next(data_, offset)) return Read::end;
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
    return Read::record;
  };
  return next_whole(read_one, [&](const CorruptDataError& error) {
    if (!reader.can_continue()) {
      throw DataError(fmt::format("{}; the TFRecord framing is lost there, so the rest of the stream cannot be read "
                                  "(even with skip_corrupt)",
                                  error.what()));
    }
  });
}

bool StreamRecordReader::next_recordio(StreamRecord& record) {
  RecordIoReader& reader = *readers_->recordio;
  const auto read_one = [&] {
    uint64_t offset = 0;
    if (!reader.next(data_, offset)) {
      return reader.resync() ? Read::again : Read::end;  // damage the reader must scan past, or the end
    }
    const RecordIoImage image = parse_recordio_image(data_.data(), data_.size(), stream_->name(), offset);
    record.label = checked_label(class_from_float_label(image.label, stream_->name(), offset), offset);
    record.image.assign(image.image, image.image + image.image_size);
    record.offset = offset;
    return Read::record;
  };
  return next_whole(read_one, [](const CorruptDataError&) {});
}

}  // namespace train::data
