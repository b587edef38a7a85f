// Helpers for the job-description tests: a throw-away /opt/ml-like directory, and the exact message of the
// ConfigError an expression throws.
#pragma once

#include "common/config_error.h"
#include "common/json_file.h"
#include "common/paths.h"
#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace train::testing {

// The job's /opt/ml-like folder, with writers for its files.
class TempJobDir : public TempFolder {
 public:
  TempJobDir() : TempFolder("train-config-test") {}

  const std::filesystem::path& root() const { return path(); }
  JobPaths paths() const { return JobPaths{.base = path()}; }

  // Writes `content` byte for byte to root/relative, creating the folders on the way.
  void write(const std::filesystem::path& relative, std::string_view content) const {
    auto file = path() / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream stream(file, std::ios::binary | std::ios::trunc);
    stream.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!stream) throw std::runtime_error("cannot write " + file.string());
  }
  void write_config(const std::string& file_name, std::string_view content) const {
    write(std::filesystem::path("input") / "config" / file_name, content);
  }
  void make_channel_dir(const std::string& channel) const {
    std::filesystem::create_directories(path() / "input" / "data" / channel);
  }
  // A File-mode "train" channel (inputdataconfig.json and its folder): what train's own training needs of a
  // job before the tests' other settings matter.
  void add_train_channel() const {
    write_config("inputdataconfig.json", R"({"train": {"TrainingInputMode": "File"}})");
    make_channel_dir("train");
  }
};

// Runs `action`, which must throw ConfigError, and returns its message. Any other exception fails the test
// as it propagates; no exception at all fails it here.
template <typename Action>
std::string config_error_message(Action&& action) {
  try {
    action();
  } catch (const ConfigError& error) {
    return error.what();
  }
  FAIL("expected a ConfigError, but nothing was thrown");
  return {};
}

// A parser of one configuration file's text as the job description reads it: the JSON parsed under the
// file's name `source`, then `parse` (parse_hyperparameters, parse_resource_config, ...) on it.
template <typename Parse>
auto config_text_parser(Parse parse, std::string source) {
  return [parse, source](const std::string& text) { return parse(parse_json_text(text, source), source); };
}

// One row of a table of malformed inputs.
struct MalformedCase {
  std::string label;
  std::string input;
  std::string expected;
};

// Each row of `cases` through `parse` (a function of the input text), one generated section a row: each must
// throw ConfigError with its row's exact message.
template <typename Parse>
void require_each_malformed_message(const std::vector<MalformedCase>& cases, Parse parse) {
  const auto& row = GENERATE_COPY(from_range(cases));
  INFO("case: " << row.label << "\ninput: " << row.input);
  REQUIRE(config_error_message([&] { parse(row.input); }) == row.expected);
}

}  // namespace train::testing
