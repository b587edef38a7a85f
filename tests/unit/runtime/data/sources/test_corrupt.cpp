// Corrupt data in every reader: by default the job fails with the file, the byte offset and the reason;
// with skip_corrupt the record is skipped and counted.
#include "runtime/data/data_error.h"
#include "runtime/data/loader/batch_loader.h"
#include "runtime/data/records/protobuf_reader.h"
#include "runtime/data/records/recordio.h"
#include "runtime/data/records/tf_example.h"
#include "runtime/data/records/tfrecord.h"
#include "runtime/data/sources/corrupt_skipping_source.h"
#include "runtime/data/sources/data_channel.h"
#include "runtime/data/sources/record_source.h"
#include "tests/unit/test_data_record_writers.h"

#include <catch2/catch.hpp>

using train::DataFormat;
using namespace train::data;
using namespace train::data::testing;
using namespace std::chrono_literals;

namespace {

DataOptions options_with(bool skip) {
  DataOptions options;
  options.image.height = options.image.width = 8;
  options.skip_corrupt = skip;
  return options;
}

Bytes jpeg(uint64_t seed) { return encode_jpeg(test_pixels(16, 12, 3, seed).data(), 16, 12, 3); }

// Three TFRecords of good Examples; returns the file's bytes and each record's offset.
Bytes three_tfrecords(std::vector<size_t>& offsets) {
  Bytes file;
  for (int i = 0; i < 3; ++i) {
    offsets.push_back(file.size());
    append(file, tfrecord(example(jpeg(i), i + 1)));
  }
  return file;
}

std::string write_channel(const TempDir& dir, const std::string& name, const std::string& file, const Bytes& bytes) {
  const std::string channel = dir.mkdir(name);
  write_bytes(std::filesystem::path(channel) / file, bytes);
  return channel;
}

// Opens `channel`, expecting CorruptDataError at `offset` whose reason contains `reason`; then with
// skip_corrupt, expecting `left` samples and `skipped` corrupt records.
void expect_corrupt(const std::string& channel, DataFormat format, uint64_t offset, const std::string& reason,
                    int64_t left, int64_t skipped) {
  try {
    open_channel(channel, std::nullopt, format, options_with(false));
    FAIL("expected a CorruptDataError");
  } catch (const CorruptDataError& error) {
    CHECK(error.offset() == offset);
    CHECK_THAT(error.reason(), Catch::Contains(reason));
    CHECK_THAT(error.what(), Catch::Contains(channel) && Catch::Contains("byte offset " + std::to_string(offset)) &&
                                 Catch::Contains("skip_corrupt=true"));
  }
  const auto opened = open_channel(channel, std::nullopt, format, options_with(true));
  CHECK(opened.source->size() == left);
  CHECK(opened.corrupt_at_open == skipped);
  REQUIRE_FALSE(opened.corrupt_notes.empty());
  CHECK_THAT(opened.corrupt_notes.front(), Catch::Contains(reason));
}

}  // namespace

TEST_CASE("corrupt TFRecord: bad data checksum, bad length checksum, truncation, bad Example", "[data]") {
  TempDir dir;
  std::vector<size_t> at;
  const Bytes good = three_tfrecords(at);

  Bytes bad_data = good;
  bad_data[at[1] + 20] ^= 0x40;  // inside record 1's data: the next record is still found
  expect_corrupt(write_channel(dir, "data_crc", "a.tfrecord", bad_data), DataFormat::detect, at[1],
                 "record data's checksum does not match", 2, 1);

  Bytes bad_length = good;
  bad_length[at[1]] ^= 0x01;  // record 1's length: the framing is lost, record 2 with it
  expect_corrupt(write_channel(dir, "length_crc", "a.tfrecord", bad_length), DataFormat::tfrecord, at[1],
                 "length's checksum does not match", 1, 1);

  const Bytes truncated(good.begin(), good.end() - 7);
  expect_corrupt(write_channel(dir, "truncated", "a.tfrecord", truncated), DataFormat::tfrecord, at[2], "truncated", 2, 1);
  const Bytes cut_header(good.begin(), good.begin() + static_cast<long>(at[2]) + 5);
  expect_corrupt(write_channel(dir, "cut_header", "a.tfrecord", cut_header), DataFormat::tfrecord, at[2],
                 "ends inside a record header", 2, 1);

  Bytes not_example = Bytes(good.begin(), good.begin() + static_cast<long>(at[1]));
  append(not_example, tfrecord(Bytes{0x0a, 0x50, 0x01}));  // field 1 claims 80 bytes, 1 is there
  expect_corrupt(write_channel(dir, "protobuf", "a.tfrecord", not_example), DataFormat::tfrecord, at[1],
                 "not a usable tf.train.Example", 1, 1);

  Bytes no_label = Bytes(good.begin(), good.begin() + static_cast<long>(at[1]));
  append(no_label, tfrecord(field(1, map_entry("image/encoded", bytes_feature(jpeg(9))))));
  expect_corrupt(write_channel(dir, "no_label", "a.tfrecord", no_label), DataFormat::tfrecord, at[1],
                 "no feature image/class/label", 1, 1);

  const Bytes packed = gzip(good);
  const Bytes cut_gzip(packed.begin(), packed.end() - 6);  // the trailer (CRC-32 and size) cut short
  const std::string channel = write_channel(dir, "gzip", "a.tfrecord.gz", cut_gzip);
  CHECK_THROWS_WITH(open_channel(channel, std::nullopt, DataFormat::tfrecord, options_with(false)),
                    Catch::Contains("a.tfrecord.gz") && Catch::Contains("truncated"));
  const auto opened = open_channel(channel, std::nullopt, DataFormat::tfrecord, options_with(true));
  CHECK(opened.corrupt_at_open == 1);  // the gzip stream; the records inflated before its end are kept
  CHECK(opened.source->size() == 3);
}

TEST_CASE("corrupt RecordIO: bad magic (resynchronised), truncation, orphan parts, a bad .idx", "[data]") {
  TempDir dir;
  Bytes file;
  std::vector<size_t> at;
  for (int i = 0; i < 4; ++i) {
    at.push_back(file.size());
    append(file, recordio(image_record(jpeg(i), static_cast<float>(i), i)));
  }
  Bytes bad_magic = file;
  bad_magic[at[1]] ^= 0xff;
  expect_corrupt(write_channel(dir, "magic", "d.rec", bad_magic), DataFormat::detect, at[1],
                 "expected the RecordIO magic number 0xced7230a", 3, 1);

  const Bytes truncated(file.begin(), file.end() - 9);
  expect_corrupt(write_channel(dir, "truncated", "d.rec", truncated), DataFormat::recordio, at[3], "truncated", 3, 1);

  Bytes orphan = file;  // record 1 says it is the last part of a multi-part record
  orphan[at[1] + 7] |= 0x60;
  expect_corrupt(write_channel(dir, "orphan", "d.rec", orphan), DataFormat::recordio, at[1],
                 "without the first part", 3, 1);

  Bytes fractional = Bytes(file.begin(), file.begin() + static_cast<long>(at[1]));
  append(fractional, recordio(image_record(jpeg(7), 2.5f, 7)));
  expect_corrupt(write_channel(dir, "fractional", "d.rec", fractional), DataFormat::recordio, at[1],
                 "label 2.5 is not a class number", 1, 1);

  const std::string channel = write_channel(dir, "idx", "d.rec", file);
  const std::string lines = "0\t" + std::to_string(at[0]) + "\n1\t" + std::to_string(at[1] + 4) + "\n2\t" +
                            std::to_string(at[2]) + "\n";
  write_bytes(std::filesystem::path(channel) / "d.idx", Bytes(lines.begin(), lines.end()));
  expect_corrupt(channel, DataFormat::recordio, at[1] + 4, "expected the RecordIO magic", 2, 1);
}

TEST_CASE("corrupt .lst lines name the file and the line's offset", "[data]") {
  TempDir dir;
  const std::string images = dir.mkdir("images/a");
  write_bytes(std::filesystem::path(images) / "x.jpg", jpeg(1));
  const std::string lists = dir.mkdir("lists");
  const std::string text = "0\t0\ta/x.jpg\n1\tseven\ta/x.jpg\n2\t1.5\ta/x.jpg\n3\t1\t../escape.jpg\n4\t0\ta/x.jpg\n";
  write_bytes(std::filesystem::path(lists) / "train.lst", Bytes(text.begin(), text.end()));
  CHECK_THROWS_WITH(open_channel(dir / "images", lists, DataFormat::detect, options_with(false)),
                    Catch::Contains("train.lst, byte offset 12") && Catch::Contains("\"seven\" is not a number"));
  const auto opened = open_channel(dir / "images", lists, DataFormat::detect, options_with(true));
  CHECK(opened.source->size() == 2);
  CHECK(opened.corrupt_at_open == 3);
}

TEST_CASE("an undecodable image fails its batch with file and offset, skip_corrupt replaces and counts it", "[data]") {
  TempDir dir;
  Bytes file;
  std::vector<size_t> at;
  for (int i = 0; i < 6; ++i) {
    at.push_back(file.size());
    const Bytes image = i == 2 ? Bytes{'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'} : jpeg(i);
    append(file, tfrecord(example(image, 1 + i % 2)));
  }
  const std::string channel = write_channel(dir, "bad_image", "a.tfrecord", file);
  LoaderOptions loader_options;
  loader_options.batch_size = 3;
  loader_options.shuffle = false;
  loader_options.epochs = 1;
  {
    const auto opened = open_channel(channel, std::nullopt, DataFormat::detect, options_with(false));
    BatchLoader loader(opened.source, loader_options);
    Batch batch;
    CHECK_THROWS_WITH(loader.next(batch, 30s), Catch::Contains("a.tfrecord, record at byte offset " + std::to_string(at[2])) &&
                                                   Catch::Contains("not a JPEG or PNG image"));
  }
  const auto opened = open_channel(channel, std::nullopt, DataFormat::detect, options_with(true));
  REQUIRE(dynamic_cast<const CorruptSkippingSource*>(opened.source.get()) != nullptr);
  BatchLoader loader(opened.source, loader_options);
  Batch first, second;
  REQUIRE(loader.next(first, 30s) == BatchLoader::Status::batch);
  REQUIRE(loader.next(second, 30s) == BatchLoader::Status::batch);
  CHECK(first.corrupt_skipped == 1);
  CHECK(second.corrupt_skipped == 0);
  // Sample 2 was replaced by sample 3: its label, and pixels as sample 3 gives them under sample 2's key.
  CHECK(first.labels == std::vector<int32_t>{0, 1, 1});
}

TEST_CASE("protobuf reader: skips unknown fields of every wire type, refuses malformed ones", "[data]") {
  Bytes message = varint_field(5, 300);
  put_varint(message, (6u << 3) | 1);  // fixed64
  put_le(message, 0x0102030405060708ull, 8);
  put_varint(message, (7u << 3) | 5);  // fixed32
  put_le(message, 7, 4);
  put_varint(message, (8u << 3) | 3);  // a group holding a varint, then its end
  append(message, varint_field(1, 1));
  put_varint(message, (8u << 3) | 4);
  append(message, example(jpeg(3), 4, false));
  const ExampleImage parsed = parse_example_image(message.data(), message.size());
  CHECK(parsed.label == 4);
  CHECK(Bytes(parsed.image, parsed.image + parsed.image_size) == jpeg(3));

  auto refuses = [](Bytes bytes, const std::string& reason) {
    INFO(reason);
    CHECK_THROWS_WITH(parse_example_image(bytes.data(), bytes.size()), Catch::Contains(reason));
  };
  refuses(Bytes{0x0f}, "wire type 7");
  refuses(Bytes{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "varint");
  refuses(Bytes{0x0a, 0x05, 0x01}, "claims 5 bytes");
  refuses(Bytes{0x1b, 0x08, 0x01}, "no end-group");
  refuses(Bytes{0x1c}, "without its start");
  refuses(Bytes{0x00}, "field number 0");
  Bytes wrong_kind = map_entry("image/encoded", int64_feature(3, true));
  append(wrong_kind, map_entry("image/class/label", int64_feature(3, true)));
  refuses(field(1, wrong_kind), "expected one bytes value");
}

TEST_CASE("TFRecord framing checks both checksums of a record in memory", "[data]") {
  Bytes record = tfrecord(Bytes{1, 2, 3});
  CHECK(check_tfrecord(record.data(), record.size(), "r", 0).second == 3);
  CHECK(looks_like_tfrecord(record.data(), record.size()));
  record[14] ^= 1;
  CHECK_THROWS_AS(check_tfrecord(record.data(), record.size(), "r", 0), CorruptDataError);
  record[14] ^= 1;
  record[3] ^= 1;
  CHECK_FALSE(looks_like_tfrecord(record.data(), record.size()));
}
