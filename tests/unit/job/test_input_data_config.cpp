// inputdataconfig.json: channels, their modes, and names that could never be directory names.
#include "common/json_file.h"
#include "common/paths.h"
#include "job/input_data_config.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace train;
using namespace train::testing;  // the job files' fixture (tests/unit/job_files_fixture.h)

namespace {

const auto parse_text = config_text_parser(parse_input_data_config, "inputdataconfig.json");

}  // namespace

TEST_CASE("inputdataconfig: SageMaker's channels", "[input_data_config]") {
  const std::string text = R"({
    "validation": {"TrainingInputMode": "Pipe", "S3DistributionType": "ShardedByS3Key",
                   "RecordWrapperType": "RecordIO", "ContentType": "application/x-recordio"},
    "train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
    "model": {"TrainingInputMode": "FastFile"},
    "my-data.v2_x": {}
  })";
  auto config = parse_text(text);
  REQUIRE(config.channels.size() == 4);
  // Sorted by name whatever the file's order.
  CHECK(config.channels[0].name == "model");
  CHECK(config.channels[1].name == "my-data.v2_x");
  CHECK(config.channels[2].name == "train");
  CHECK(config.channels[3].name == "validation");

  const Channel* train = config.find("train");
  REQUIRE(train != nullptr);
  CHECK(train->mode == InputMode::file);
  CHECK(train->distribution == S3Distribution::fully_replicated);
  CHECK(train->record_wrapper == RecordWrapper::none);
  CHECK(train->content_type.empty());

  const Channel* validation = config.find("validation");
  REQUIRE(validation != nullptr);
  CHECK(validation->mode == InputMode::pipe);
  CHECK(validation->distribution == S3Distribution::sharded_by_s3_key);
  CHECK(validation->record_wrapper == RecordWrapper::recordio);
  CHECK(validation->content_type == "application/x-recordio");

  CHECK(config.find("model")->mode == InputMode::fast_file);
  // Absent settings take SageMaker's defaults.
  const Channel* defaults = config.find("my-data.v2_x");
  REQUIRE(defaults != nullptr);
  CHECK(defaults->mode == InputMode::file);
  CHECK(defaults->distribution == S3Distribution::fully_replicated);
  CHECK(defaults->record_wrapper == RecordWrapper::none);
  CHECK(config.find("test") == nullptr);

  CHECK(config.document == nlohmann::json::parse(text));
  CHECK(JobPaths{.base = "/opt/ml"}.channel("train") == "/opt/ml/input/data/train");
}

TEST_CASE("inputdataconfig: other valid shapes", "[input_data_config]") {
  SECTION("no channels at all") { CHECK(parse_text("{}").channels.empty()); }
  SECTION("null settings mean the default") {
    auto config = parse_text(R"({"train": {"TrainingInputMode": null, "ContentType": null}})");
    CHECK(config.find("train")->mode == InputMode::file);
    CHECK(config.find("train")->content_type.empty());
  }
  SECTION("unknown settings are ignored") {
    auto config = parse_text(R"({"train": {"TrainingInputMode": "File", "S3Uri": "s3://bucket/key"}})");
    CHECK(config.channels.size() == 1);
  }
  SECTION("a 64-character name is the longest") {
    std::string name(64, 'c');
    CHECK(parse_text(R"({")" + name + R"(": {}})").channels.at(0).name == name);
  }
}

TEST_CASE("inputdataconfig: channel name rule and names of values", "[input_data_config]") {
  for (const char* name : {"train", "my-data", "a.b_c-D9", "..."}) {
    INFO("channel name \"" << name << "\"");
    CHECK(is_valid_channel_name(name));
  }
  for (const std::string& name : {std::string(), std::string("."), std::string(".."), std::string("../x"),
                                  std::string("a/b"), std::string(65, 'c')}) {
    INFO("channel name \"" << name << "\"");
    CHECK_FALSE(is_valid_channel_name(name));
  }
  CHECK(std::string(to_string(InputMode::fast_file)) == "FastFile");
  CHECK(std::string(to_string(S3Distribution::sharded_by_s3_key)) == "ShardedByS3Key");
  CHECK(std::string(to_string(RecordWrapper::recordio)) == "RecordIO");
}

namespace {

std::string bad_name_message(const std::string& quoted_name) {
  return "inputdataconfig.json: channel name " + quoted_name +
         " is not allowed: use 1-64 letters, digits, '.', '-' or '_' (it becomes a directory under input/data)";
}

std::vector<MalformedCase> malformed_input_data_configs() {
  return {
      {"not JSON", R"({"train": {"TrainingInputMode": "File"})",
       "inputdataconfig.json: not valid JSON (parse error at line 1, column 40: syntax error while parsing object - "
       "unexpected end of input; expected '}'); fix the file so that it is one UTF-8 JSON object"},
      {"non-UTF-8 byte in a channel name", "{\"tr\xe4in\": {}}",
       "inputdataconfig.json: not valid JSON (parse error at line 1, column 6: syntax error while parsing object key "
       "- invalid string: ill-formed UTF-8 byte; last read: '\"tr\\xE4i'; expected string literal); fix the file so "
       "that it is one UTF-8 JSON object"},
      {"a channel given twice", R"({"train": {}, "train": {"TrainingInputMode": "Pipe"}})",
       "inputdataconfig.json: key \"train\" appears more than once in one object; keep exactly one"},
      {"a channel with a control character given twice", R"({"a\nb": {}, "a\nb": {}})",
       "inputdataconfig.json: key \"a\\nb\" appears more than once in one object; keep exactly one"},
      {"a list", R"([{"train": {}}])",
       "inputdataconfig.json: expected a JSON object mapping channel names to their settings, got a list"},
      {"a number", "3", "inputdataconfig.json: expected a JSON object mapping channel names to their settings, got an "
                        "integer"},

      // Names that would escape input/data or are not names at all.
      {"parent directory", R"({"../x": {}})", bad_name_message("\"../x\"")},
      {"a subdirectory", R"({"a/b": {}})", bad_name_message("\"a/b\"")},
      {"an absolute path", R"({"/etc": {}})", bad_name_message("\"/etc\"")},
      {"dot dot", R"({"..": {}})", bad_name_message("\"..\"")},
      {"dot", R"({".": {}})", bad_name_message("\".\"")},
      {"empty", R"({"": {}})", bad_name_message("\"\"")},
      {"a space", R"({"train data": {}})", bad_name_message("\"train data\"")},
      {"a backslash", R"({"a\\b": {}})", bad_name_message("\"a\\\\b\"")},
      {"a newline", R"({"train\n": {}})", bad_name_message("\"train\\n\"")},
      {"a NUL character", R"({"train\u0000x": {}})", bad_name_message("\"train\\u0000x\"")},
      {"non-ASCII letters", R"({"trâin": {}})", bad_name_message("\"trâin\"")},
      {"65 characters", R"({")" + std::string(65, 'c') + R"(": {}})",
       bad_name_message("\"" + std::string(59, 'c') + "... (67 characters)")},
      {"a shell character", R"({"train;rm": {}})", bad_name_message("\"train;rm\"")},

      // Settings.
      {"settings a string", R"({"train": "File"})",
       "inputdataconfig.json: channel \"train\": expected an object such as {\"TrainingInputMode\": \"File\"}, got a "
       "string \"File\""},
      {"settings null", R"({"train": null})",
       "inputdataconfig.json: channel \"train\": expected an object such as {\"TrainingInputMode\": \"File\"}, got "
       "null"},
      {"mode in lower case", R"({"train": {"TrainingInputMode": "file"}})",
       "inputdataconfig.json: channel \"train\": \"TrainingInputMode\": expected \"File\", \"Pipe\" or \"FastFile\", "
       "got a string \"file\""},
      {"mode a number", R"({"train": {"TrainingInputMode": 1}})",
       "inputdataconfig.json: channel \"train\": \"TrainingInputMode\": expected \"File\", \"Pipe\" or \"FastFile\", "
       "got an integer 1"},
      {"distribution unknown", R"({"train": {"S3DistributionType": "Sharded"}})",
       "inputdataconfig.json: channel \"train\": \"S3DistributionType\": expected \"FullyReplicated\" or "
       "\"ShardedByS3Key\", got a string \"Sharded\""},
      {"record wrapper in lower case", R"({"train": {"RecordWrapperType": "recordio"}})",
       "inputdataconfig.json: channel \"train\": \"RecordWrapperType\": expected \"None\" or \"RecordIO\", got a "
       "string \"recordio\""},
      {"record wrapper a list", R"({"train": {"RecordWrapperType": ["None"]}})",
       "inputdataconfig.json: channel \"train\": \"RecordWrapperType\": expected \"None\" or \"RecordIO\", got a "
       "list [\"None\"]"},
      {"content type a number", R"({"train": {"ContentType": 5}})",
       "inputdataconfig.json: channel \"train\": \"ContentType\": expected a string such as \"application/x-image\", "
       "got an integer 5"},
      {"the second channel is wrong", R"({"a": {}, "b": {"TrainingInputMode": "Stream"}})",
       "inputdataconfig.json: channel \"b\": \"TrainingInputMode\": expected \"File\", \"Pipe\" or \"FastFile\", got "
       "a string \"Stream\""},

      // Every problem at once, one per line, in the file's key order (nlohmann sorts keys).
      {"two invalid names and a bad mode", R"({"a b": {}, "ok": {"TrainingInputMode": "Stream"}, "x/y": {}})",
       bad_name_message("\"a b\"") +
           "\ninputdataconfig.json: channel \"ok\": \"TrainingInputMode\": expected \"File\", \"Pipe\" or "
           "\"FastFile\", got a string \"Stream\"\n" +
           bad_name_message("\"x/y\"")},
  };
}

}  // namespace

TEST_CASE("inputdataconfig: malformed files, each with its exact message", "[input_data_config][malformed]") {
  require_each_malformed_message(malformed_input_data_configs(), parse_text);
}

TEST_CASE("inputdataconfig: read from a file names the file", "[input_data_config]") {
  train::testing::TempJobDir dir;
  dir.write_config("inputdataconfig.json", R"({"../../etc": {}})");
  auto path = dir.paths().input_data_config();
  CHECK(config_error_message([&] { read_input_data_config(path); }) ==
        path.string() + ": channel name \"../../etc\" is not allowed: use 1-64 letters, digits, '.', '-' or '_' (it "
                        "becomes a directory under input/data)");
}
