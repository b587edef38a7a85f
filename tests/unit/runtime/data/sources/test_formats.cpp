// One generated data set written as an image folder, TFRecord (plain, extension-less and gzip shards),
// RecordIO (with and without .idx, multi-part records, label arrays) and a .lst image list: every format
// is detected, indexed in the same order with the same labels, and gives bit-identical batches.
#include "common/process_identity.h"
#include "runtime/data/data_error.h"
#include "runtime/data/loader/batch_loader.h"
#include "runtime/data/sources/data_channel.h"
#include "runtime/data/sources/record_source.h"
#include "tests/unit/test_data_batches.h"
#include "tests/unit/test_data_record_writers.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <fstream>
#include <set>
#include <sys/wait.h>
#include <unistd.h>
#include <iterator>

using train::Augmentation;
using train::DataFormat;
using train::data_format_name;
using namespace train::data;
using namespace train::data::testing;

namespace {

DataOptions small_options(Augmentation augmentation = Augmentation::crop) {
  DataOptions options;
  options.image.height = options.image.width = 12;
  options.image.augmentation = augmentation;
  return options;
}

std::vector<Batch> all_batches(std::shared_ptr<const SampleSource> source, int rank, int ranks, uint64_t seed) {
  BatchLoader loader(std::move(source),
                     {.batch_size = 4, .threads = 3, .seed = seed, .rank = rank, .ranks = ranks, .epochs = 2});
  return drain(loader);
}

}  // namespace

TEST_CASE("data formats: every format of one data set is detected and gives bit-identical batches", "[data]") {
  TempDir dir;
  const auto images = generated_images();
  const auto set = write_generated_data_set(dir.path(), images);

  const auto folder = open_channel(set.folder, std::nullopt, DataFormat::detect, small_options());
  REQUIRE(folder.layout.format == DataFormat::image_folder);
  REQUIRE(folder.source->size() == static_cast<int64_t>(images.size()));
  const auto tfrecord = open_channel(set.tfrecord, std::nullopt, DataFormat::detect, small_options());
  CHECK(tfrecord.layout.format == DataFormat::tfrecord);
  CHECK(tfrecord.layout.files.size() == 3);
  const auto recordio = open_channel(set.recordio, std::nullopt, DataFormat::detect, small_options());
  CHECK(recordio.layout.format == DataFormat::recordio);
  CHECK(recordio.layout.idx_files.at(0).size() > 0);
  const auto bare = open_channel(set.recordio_bare, std::nullopt, DataFormat::detect, small_options());
  CHECK(bare.layout.format == DataFormat::recordio);
  CHECK(bare.layout.idx_files.at(0).empty());
  const auto list = open_channel(set.list_images, set.list_lists, DataFormat::detect, small_options());
  CHECK(list.layout.format == DataFormat::image_list);

  for (const auto* opened : {&tfrecord, &recordio, &bare, &list}) {
    INFO(data_format_name(opened->layout.format) << " in " << opened->layout.root);
    CHECK(opened->source->size() == static_cast<int64_t>(images.size()));
    CHECK(opened->source->num_classes() == 3);
    CHECK(opened->corrupt_at_open == 0);
    for (int ranks : {1, 3}) {
      for (int rank = 0; rank < ranks; ++rank) {
        require_same_batches(all_batches(folder.source, rank, ranks, 17),
                             all_batches(opened->source, rank, ranks, 17));
      }
    }
  }
  // The multi-part record (magic numbers inside the image) comes back whole from both RecordIO readers.
  const auto& record_source = static_cast<const RecordSource&>(*recordio.source);
  for (size_t i = 0; i < images.size(); ++i) {
    CHECK(record_source.image_bytes(static_cast<int64_t>(i)) == images[i].bytes);
    CHECK(static_cast<const RecordSource&>(*bare.source).index().entries[i].offset == record_source.index().entries[i].offset);
  }
}

TEST_CASE("data formats: data_format forces a format, an unknown layout is explained", "[data]") {
  TempDir dir;
  const auto set = write_generated_data_set(dir.path(), generated_images());
  CHECK(detect_channel_layout(set.tfrecord, std::nullopt, DataFormat::tfrecord).format == DataFormat::tfrecord);
  CHECK_THROWS_WITH(detect_channel_layout(set.folder, std::nullopt, DataFormat::recordio),
                    Catch::Contains("no .rec file") && Catch::Contains(set.folder));
  CHECK_THROWS_WITH(detect_channel_layout(set.recordio, std::nullopt, DataFormat::tfrecord),
                    Catch::Contains("no file here starts like a TFRecord"));
  const std::string odd = dir.mkdir("odd");
  write_bytes(std::filesystem::path(odd) / "notes.txt", Bytes{'h', 'i'});
  CHECK_THROWS_WITH(detect_channel_layout(odd, std::nullopt, DataFormat::detect),
                    Catch::Contains("cannot tell the data's format") && Catch::Contains("notes.txt") &&
                        Catch::Contains("data_format"));
  CHECK_THROWS_AS(detect_channel_layout(dir / "missing", std::nullopt, DataFormat::detect), DataError);
}

TEST_CASE("data formats: tfrecord_label_offset is subtracted, a label below it is a setting to fix", "[data]") {
  TempDir dir;
  const auto set = write_generated_data_set(dir.path(), generated_images());
  auto options = small_options();
  options.tfrecord_label_offset = 0;
  const auto zero_based = open_channel(set.tfrecord, std::nullopt, DataFormat::detect, options);
  CHECK(zero_based.source->num_classes() == 4);  // labels 1..3 kept as they are
  options.tfrecord_label_offset = 2;
  options.skip_corrupt = true;  // not a corruption: fails anyway
  CHECK_THROWS_WITH(open_channel(set.tfrecord, std::nullopt, DataFormat::detect, options),
                    Catch::Contains("image/class/label is 1") && Catch::Contains("tfrecord_label_offset=2"));
}

TEST_CASE("data formats: validation image folders take the training folder's class numbers", "[data]") {
  TempDir dir;
  const auto set = write_generated_data_set(dir.path(), generated_images());
  const auto training = open_channel(set.folder, std::nullopt, DataFormat::detect, small_options());
  const std::string validation = dir.mkdir("validation/cow");
  write_bytes(std::filesystem::path(validation) / "x.png", generated_images()[0].bytes);
  const auto opened = open_channel(dir / "validation", std::nullopt, DataFormat::detect,
                                   small_options(Augmentation::none), &training);
  CHECK(opened.folder->labels == std::vector<int32_t>{2});
}

TEST_CASE("data formats: a record index travels as bytes, share_index decides who builds it", "[data]") {
  TempDir dir;
  const auto images = generated_images();
  const auto set = write_generated_data_set(dir.path(), images);
  auto options = small_options();
  int builds = 0;
  std::string travelled;
  options.share_index = [&](const std::function<RecordIndex()>& build) {
    ++builds;
    RecordIndex built = build();
    travelled = serialize_record_index(built);
    RecordIndex received = parse_record_index(travelled);  // what the host's other ranks get
    hold_temporary_files(received);  // before the builder's folder of inflated shards goes, as on a host
    return received;
  };
  for (const std::string& channel : {set.tfrecord, set.recordio}) {
    const auto shared = open_channel(channel, std::nullopt, DataFormat::detect, options);
    const auto own = open_channel(channel, std::nullopt, DataFormat::detect, small_options());
    const auto& a = static_cast<const RecordSource&>(*shared.source).index();
    const auto& b = static_cast<const RecordSource&>(*own.source).index();
    REQUIRE(a.entries.size() == b.entries.size());
    for (size_t i = 0; i < a.entries.size(); ++i) {
      CHECK(a.entries[i].offset == b.entries[i].offset);
      CHECK(a.entries[i].length == b.entries[i].length);
      CHECK(a.entries[i].label == b.entries[i].label);
      CHECK(a.entries[i].file == b.entries[i].file);
    }
    CHECK(a.files.size() == b.files.size());
    CHECK(a.num_classes == b.num_classes);
    CHECK(a.format == b.format);
  }
  CHECK(builds == 2);
  CHECK_THROWS_AS(parse_record_index(travelled.substr(0, travelled.size() - 3)), DataError);
  CHECK_THROWS_AS(parse_record_index("not an index"), DataError);
}

static std::string text_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_CASE("data formats: every format sums up its labels and says where the highest one is", "[data]") {
  TempDir dir;
  const auto set = write_generated_data_set(dir.path(), generated_images());  // labels 0, 1, 2
  const auto check = [](const OpenedData& opened, const std::string& where) {
    CHECK(opened.labels.lowest == 0);
    CHECK(opened.labels.highest == 2);
    CHECK(opened.labels.below_highest == 1);
    CHECK(opened.labels.highest_at == where);
  };
  check(open_channel(set.folder, std::nullopt, DataFormat::detect, small_options()), set.folder + "/cow");
  // The first record of label 2 is sample 9: in the second plain shard, after four records.
  const auto tfrecord = open_channel(set.tfrecord, std::nullopt, DataFormat::detect, small_options());
  check(tfrecord, tfrecord.labels.highest_at);
  CHECK_THAT(tfrecord.labels.highest_at,
             Catch::StartsWith(set.tfrecord + "/train-00001-of-00003, byte offset ") && !Catch::EndsWith("offset 0"));
  const auto recordio = open_channel(set.recordio, std::nullopt, DataFormat::detect, small_options());
  CHECK_THAT(recordio.labels.highest_at, Catch::StartsWith(set.recordio + "/data.rec, byte offset "));
  check(recordio, recordio.labels.highest_at);

  // One mistyped label in an .lst file: its line is named (the trainer then refuses it, see training_data.cpp).
  const std::string lst = set.list_lists + "/train.lst";
  std::string text = text_of(lst);
  const size_t line = text.find("\n3\t") + 1;
  const size_t label = text.find('\t', line) + 1;
  text.replace(label, text.find('\t', label) - label, "1000000");
  write_bytes(lst, Bytes(text.begin(), text.end()));
  const auto list = open_channel(set.list_images, set.list_lists, DataFormat::detect, small_options());
  CHECK(list.labels.highest == 1000000);
  CHECK(list.labels.below_highest == 2);
  CHECK(list.labels.highest_at == fmt::format("{}, byte offset {}", lst, line));
}

TEST_CASE("data formats: a label too large for a class number is named as such", "[data]") {
  TempDir dir;
  const auto set = write_generated_data_set(dir.path(), generated_images());
  const std::string lst = set.list_lists + "/train.lst";
  std::string text = text_of(lst);
  const size_t label = text.find('\t') + 1;
  text.replace(label, text.find('\t', label) - label, "1e9");
  write_bytes(lst, Bytes(text.begin(), text.end()));
  CHECK_THROWS_WITH(open_channel(set.list_images, set.list_lists, DataFormat::detect, small_options()),
                    Catch::StartsWith(lst + ", byte offset 0: label 1000000000 is far too large to be a class number"));
}

TEST_CASE("data formats: inflated gzip shards leave nothing in TMPDIR, even after a process is killed", "[data]") {
  TempDir dir, tmp;
  const auto set = write_generated_data_set(dir.path(), generated_images());
  const char* saved = std::getenv("TMPDIR");
  const std::string saved_value = saved ? saved : "";
  ::setenv("TMPDIR", tmp.path().c_str(), 1);
  // The folder of a process that was killed while inflating (it has ended), and one of a live one.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  REQUIRE(dead > 0);
  ::waitpid(dead, nullptr, 0);
  const std::string orphan = fmt::format("train-records-{}-AbCdEf", dead);
  const std::string alive = fmt::format("train-records-{}-GhIjKl", ::getpid());
  tmp.mkdir(orphan);
  tmp.mkdir(alive);
  write_bytes(tmp.path() / orphan / "0.tfrecord", Bytes{1, 2, 3});
  // Each says whose it is, as common/owned_folder.h writes it.
  const train::ProcessIdentity ended{dead, 1, train::this_process().pid_namespace};
  const auto text_bytes = [](const std::string& text) { return Bytes(text.begin(), text.end()); };
  write_bytes(tmp.path() / orphan / "owner", text_bytes(ended.to_text()));
  write_bytes(tmp.path() / alive / "owner", text_bytes(train::this_process().to_text()));

  const auto opened = open_channel(set.tfrecord, std::nullopt, DataFormat::detect, small_options());
  std::set<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(tmp.path())) left.insert(entry.path().filename());
  // The dead process's folder is gone, this one's inflated shard is unlinked already, the live one's kept.
  CHECK(left == std::set<std::string>{alive});
  // ... and its records still read, through the descriptor held open.
  const auto& source = static_cast<const RecordSource&>(*opened.source);
  const auto& index = source.index();
  REQUIRE(index.held != nullptr);
  for (int64_t i = 0; i < source.size(); ++i) CHECK_FALSE(source.image_bytes(i).empty());
  CHECK(index.files.back().temporary);
  CHECK_FALSE(index.files.front().temporary);
  if (saved) ::setenv("TMPDIR", saved_value.c_str(), 1); else ::unsetenv("TMPDIR");
}
