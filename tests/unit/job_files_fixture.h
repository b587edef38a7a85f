// Helpers for the job-description tests: a throw-away /opt/ml-like directory, and the exact message of the
// ConfigError an expression throws.
#pragma once

#include "common/config_error.h"
#include "common/paths.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace train::testing {

// A directory made with mkdtemp, removed with everything in it when the object goes.
class TempJobDir {
 public:
  TempJobDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "train-config-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    root_ = pattern;
  }
  ~TempJobDir() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  TempJobDir(const TempJobDir&) = delete;
  TempJobDir& operator=(const TempJobDir&) = delete;

  const std::filesystem::path& root() const { return root_; }
  JobPaths paths() const { return JobPaths{.base = root_}; }

  // Writes `content` byte for byte to root/relative, creating the folders on the way.
  void write(const std::filesystem::path& relative, std::string_view content) const {
    auto path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream stream(path, std::ios::binary | std::ios::trunc);
    stream.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!stream) throw std::runtime_error("cannot write " + path.string());
  }
  void write_config(const std::string& file_name, std::string_view content) const {
    write(std::filesystem::path("input") / "config" / file_name, content);
  }
  void make_channel_dir(const std::string& channel) const {
    std::filesystem::create_directories(root_ / "input" / "data" / channel);
  }
  // A File-mode "train" channel (inputdataconfig.json and its folder): what train's own training needs of a
  // job before the tests' other settings matter.
  void add_train_channel() const {
    write_config("inputdataconfig.json", R"({"train": {"TrainingInputMode": "File"}})");
    make_channel_dir("train");
  }

 private:
  std::filesystem::path root_;
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

// One row of a table of malformed inputs.
struct MalformedCase {
  std::string label;
  std::string input;
  std::string expected;
};

}  // namespace train::testing
