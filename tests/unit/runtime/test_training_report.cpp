// The trainer's reports: TensorBoard's event records (decoded here independently of the writer's code), the
// per-rank timing line, the straggler rule, and metrics.json.
#include "runtime/data/records/crc32c.h"
#include "runtime/metrics_summary.h"
#include "runtime/rank_timing.h"
#include "runtime/tensorboard_writer.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

using namespace train;
using train::testing::config_error_message;
using train::testing::TempJobDir;

namespace {

// A minimal protobuf reader for the test: (field, wire type, value bytes) of each field in order.
struct Field {
  uint32_t number;
  int type;
  uint64_t varint = 0;
  std::string bytes;  // length-delimited, fixed32 and fixed64 payloads
};

uint64_t read_varint(const std::string& data, size_t& at) {
  uint64_t value = 0;
  for (int shift = 0; at < data.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(data[at++]);
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return value;
  }
  FAIL("truncated varint");
  return 0;
}

std::vector<Field> fields_of(const std::string& data) {
  std::vector<Field> fields;
  size_t at = 0;
  while (at < data.size()) {
    const uint64_t key = read_varint(data, at);
    Field field{static_cast<uint32_t>(key >> 3), static_cast<int>(key & 7)};
    if (field.type == 0) field.varint = read_varint(data, at);
    size_t length = field.type == 1 ? 8 : field.type == 5 ? 4 : field.type == 2 ? read_varint(data, at) : 0;
    REQUIRE(at + length <= data.size());
    field.bytes = data.substr(at, length);
    at += length;
    fields.push_back(field);
  }
  return fields;
}

template <typename T>
T little_endian(const std::string& bytes) {
  T value;
  REQUIRE(bytes.size() == sizeof(T));
  std::memcpy(&value, bytes.data(), sizeof(T));  // this machine is little-endian, as the format
  return value;
}

// The records of a TFRecord file, each checksum checked.
std::vector<std::string> records_of(const std::string& file) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    REQUIRE(at + 12 <= file.size());
    const auto length = little_endian<uint64_t>(file.substr(at, 8));
    CHECK(little_endian<uint32_t>(file.substr(at + 8, 4)) ==
          data::masked_crc32c(reinterpret_cast<const uint8_t*>(file.data() + at), 8));
    REQUIRE(at + 12 + length + 4 <= file.size());
    std::string data = file.substr(at + 12, length);
    CHECK(little_endian<uint32_t>(file.substr(at + 12 + length, 4)) ==
          data::masked_crc32c(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
    records.push_back(std::move(data));
    at += 12 + length + 4;
  }
  return records;
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::ostringstream text;
  text << stream.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("TensorBoard: an Event with scalars, field by field", "[training_report]") {
  const std::string event = encode_scalar_event(1700000000.5, 300, {{"train/loss", 1.25f}, {"validation/top1", 0.5f}});
  auto fields = fields_of(event);
  REQUIRE(fields.size() == 3);
  CHECK(fields[0].number == 1);  // wall_time, a double
  CHECK(little_endian<double>(fields[0].bytes) == 1700000000.5);
  CHECK((fields[1].number == 2 && fields[1].type == 0 && fields[1].varint == 300));  // step
  CHECK((fields[2].number == 5 && fields[2].type == 2));                          // summary
  auto values = fields_of(fields[2].bytes);
  REQUIRE(values.size() == 2);
  for (const auto& value : values) CHECK(value.number == 1);  // Summary.value, repeated
  auto first = fields_of(values[0].bytes);
  REQUIRE(first.size() == 2);
  CHECK((first[0].number == 1 && first[0].bytes == "train/loss"));           // tag
  CHECK((first[1].number == 2 && first[1].type == 5));                       // simple_value, a float
  CHECK(little_endian<float>(first[1].bytes) == 1.25f);
  auto version = fields_of(encode_file_version_event(12.0));
  REQUIRE(version.size() == 2);
  CHECK((version[1].number == 3 && version[1].bytes == "brain.Event:2"));
  // TFRecord framing, with TensorFlow's known masked CRC-32C of the empty string (0xa282ead8 + 0 rotated).
  CHECK(records_of(tfrecord_frame("")) == std::vector<std::string>{""});
  CHECK(tfrecord_frame("").substr(12, 4) == std::string("\xd8\xea\x82\xa2", 4));
}

TEST_CASE("TensorBoard: the writer's file holds the version, then one event per step", "[training_report]") {
  TempJobDir dir;
  std::filesystem::path path;
  {
    TensorBoardWriter writer(dir.root() / "tensorboard" / "nested", "algo-1");
    path = writer.path();
    CHECK(path.filename().string().rfind("events.out.tfevents.", 0) == 0);
    CHECK(path.filename().string().find(".algo-1") != std::string::npos);
    writer.scalar("a", 1, 0.5);
    writer.scalar("b", 1, 2.0);
    writer.scalar("a", 10, 0.25);
    // Nothing of steps 1 and 10 is in the file before flush(): a reader never sees a step half written.
    CHECK(records_of(read_all(path)).size() == 1);
    writer.flush();
  }
  auto records = records_of(read_all(path));
  REQUIRE(records.size() == 3);
  CHECK(fields_of(records[0])[1].bytes == "brain.Event:2");
  CHECK(fields_of(records[1])[1].varint == 1);
  CHECK(fields_of(fields_of(records[1])[2].bytes).size() == 2);  // both scalars of step 1 in one event
  CHECK(fields_of(records[2])[1].varint == 10);
  // A folder that cannot be made is an error naming the file.
  dir.write("blocked", "a file, not a folder");
  CHECK_THROWS_WITH(TensorBoardWriter(dir.root() / "blocked" / "tb", "algo-1"),
                    Catch::Contains("cannot create the TensorBoard events file"));
}

TEST_CASE("rank timing: the slowest and fastest rank of each measure, with their hosts", "[training_report]") {
  const std::vector<RankTimes> times = {{0.50, 0.01, 0.20}, {0.52, 0.30, 0.02}, {0.49, 0.00, 0.25}};
  const std::vector<std::string> hosts = {"algo-1", "algo-1", "algo-2"};
  CHECK(format_timing_line(40, times, hosts) ==
        "timing step=40 step_time max=0.5200 (rank 1 on algo-1) min=0.4900 (rank 2 on algo-2) "
        "data_wait max=0.3000 (rank 1 on algo-1) min=0.0000 (rank 2 on algo-2) "
        "reduction_wait max=0.2500 (rank 2 on algo-2) min=0.0200 (rank 1 on algo-1)");
}

TEST_CASE("rank timing: a straggler is named after the set number of intervals, then as its streak doubles",
          "[training_report]") {
  StragglerWatch watch(StragglerRule{.factor = 1.5, .intervals = 2});
  const std::vector<std::string> hosts = {"algo-1", "algo-1", "algo-2", "algo-2"};
  // Rank 3 computes for 0.9 s a step; the others wait for it in their reduction.
  const std::vector<RankTimes> slow = {{1.0, 0.0, 0.6}, {1.0, 0.0, 0.6}, {1.0, 0.0, 0.6}, {1.0, 0.0, 0.1}};
  const std::vector<RankTimes> even = {{0.5, 0.0, 0.1}, {0.5, 0.0, 0.1}, {0.5, 0.0, 0.1}, {0.5, 0.0, 0.1}};
  CHECK(watch.observe(slow, hosts).empty());  // once is not persistent
  auto warned = watch.observe(slow, hosts);
  REQUIRE(warned.size() == 1);
  CHECK(warned[0] ==
        "warning: straggler: rank 3 on host algo-2 has been slower than the median rank for 2 log intervals in a "
        "row: 0.9000 s per step of its own work (step time less reduction wait) against the median's 0.4000 s "
        "(2.25x; the threshold is 1.50x, TRAIN_STRAGGLER_FACTOR)");
  CHECK(watch.observe(slow, hosts).empty());     // 3
  CHECK(watch.observe(slow, hosts).size() == 1);  // 4: twice the rule's length
  CHECK(watch.observe(slow, hosts).empty());     // 5
  CHECK(watch.observe(even, hosts).empty());     // the streak ends
  CHECK(watch.observe(slow, hosts).empty());     // and starts again from 1
  CHECK(watch.observe(slow, hosts).size() == 1);
  // Data wait is the rank's own time too: a rank starved of data slows the job as much.
  StragglerWatch data_watch(StragglerRule{.factor = 1.5, .intervals = 1});
  const std::vector<RankTimes> starved = {{1.0, 0.0, 0.7}, {1.0, 0.7, 0.0}, {1.0, 0.0, 0.7}};
  auto named = data_watch.observe(starved, {"h0", "h1", "h2"});
  REQUIRE(named.size() == 1);
  CHECK(named[0].find("rank 1 on host h1") != std::string::npos);
  // One rank waits for nobody.
  CHECK(data_watch.observe({{1.0, 0.5, 0.0}}, {"h0"}).empty());
}

TEST_CASE("rank timing: the straggler rule from the environment", "[training_report]") {
  CHECK(straggler_rule_from_environment({}).factor == 1.5);
  CHECK(straggler_rule_from_environment({}).intervals == 3);
  auto rule = straggler_rule_from_environment({{"TRAIN_STRAGGLER_FACTOR", "2.5"}, {"TRAIN_STRAGGLER_INTERVALS", "5"}});
  CHECK((rule.factor == 2.5 && rule.intervals == 5));
  CHECK(config_error_message([] { straggler_rule_from_environment({{"TRAIN_STRAGGLER_FACTOR", "1"}}); }) ==
        "environment variable TRAIN_STRAGGLER_FACTOR: expected a number above 1 and at most 1000 such as 1.5, got \"1\"");
  CHECK(config_error_message([] { straggler_rule_from_environment({{"TRAIN_STRAGGLER_INTERVALS", "0"}}); }) ==
        "environment variable TRAIN_STRAGGLER_INTERVALS: expected a whole number of log intervals from 1 to 999999 such as 3, "
        "got \"0\"");
}

TEST_CASE("metrics.json: per-epoch and final figures", "[training_report]") {
  MetricsSummary summary(nlohmann::json{{"num_layers", 18}});
  JobStepSums first{.loss = 230.0, .images = 100, .correct = 40, .seconds = 4.0, .steps = 10};
  JobStepSums second{.loss = 150.0, .images = 100, .correct = 70, .seconds = 5.0, .steps = 10};
  summary.add_epoch(0, 10, first, Validation{0.6, 0.9, 50}, true);
  summary.add_epoch(1, 20, second, std::nullopt, true);
  const auto document = summary.to_json("finished", 20, 12.5);
  CHECK(document.at("job").at("num_layers") == 18);
  REQUIRE(document.at("epochs").size() == 2);
  const auto& epoch0 = document.at("epochs")[0];
  CHECK(epoch0.at("loss") == Approx(2.3));
  CHECK(epoch0.at("train_top1") == Approx(0.4));
  CHECK(epoch0.at("images_per_sec") == Approx(25.0));
  CHECK(epoch0.at("validation_top1") == 0.6);
  CHECK(epoch0.at("validation_top5") == 0.9);
  CHECK_FALSE(document.at("epochs")[1].contains("validation_top1"));
  const auto& final_figures = document.at("final");
  CHECK(final_figures.at("status") == "finished");
  CHECK(final_figures.at("epochs_completed") == 2);
  CHECK(final_figures.at("loss") == Approx(1.5));                // the last epoch's
  CHECK(final_figures.at("validation_top1") == 0.6);             // the last validation
  CHECK(final_figures.at("images_per_sec") == Approx(200.0 / 9.0));  // all images over training time
  CHECK(final_figures.at("wall_time_seconds") == 12.5);
  TempJobDir dir;
  summary.write(dir.root() / "output", dir.root() / "output" / "data" / "metrics.json", "finished", 20, 12.5);
  CHECK(nlohmann::json::parse(read_all(dir.root() / "output" / "data" / "metrics.json")) == document);
}

TEST_CASE("metrics.json: a symbolic link in output/data's place is not followed", "[training_report]") {
  // Issue 31: metrics.json went wherever a link planted at output/data pointed, outside the job.
  TempJobDir dir;
  train::testing::TempFolder outside("train-outside");
  std::filesystem::create_directories(dir.root() / "output");
  std::filesystem::create_directory_symlink(outside.path(), dir.root() / "output" / "data");
  MetricsSummary summary(nlohmann::json{{"num_layers", 18}});
  const auto data = dir.root() / "output" / "data";
  CHECK_THROWS_WITH(summary.write(dir.root() / "output", data / "metrics.json", "finished", 0, 1.0),
                    data.string() + " is a symbolic link (to " + outside.path().string() +
                        "), which train does not follow: its outputs stay in the job's folders; replace the link "
                        "with a folder");
  CHECK(outside.entries().empty());
  // Anything else in a folder's place is said too; missing folders are made.
  std::filesystem::remove(data);
  std::ofstream(data) << "a file";
  CHECK_THROWS_WITH(summary.write(dir.root() / "output", data / "metrics.json", "finished", 0, 1.0),
                    data.string() + " is not a folder; remove it, and train makes the folder");
  std::filesystem::remove(data);
  summary.write(dir.root() / "output", data / "deeper" / "metrics.json", "finished", 0, 1.0);
  CHECK(std::filesystem::is_regular_file(data / "deeper" / "metrics.json"));
}
