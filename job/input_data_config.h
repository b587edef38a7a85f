// inputdataconfig.json: the job's data channels and how SageMaker delivers each.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace train {

enum class InputMode { file, pipe, fast_file };
enum class S3Distribution { fully_replicated, sharded_by_s3_key };
enum class RecordWrapper { none, recordio };

struct Channel {
  std::string name;
  InputMode mode = InputMode::file;
  S3Distribution distribution = S3Distribution::fully_replicated;
  RecordWrapper record_wrapper = RecordWrapper::none;
  std::string content_type;  // empty when absent
};

struct InputDataConfig {
  std::vector<Channel> channels;  // sorted by name
  nlohmann::json document;        // the file as read, for SM_INPUT_DATA_CONFIG

  const Channel* find(const std::string& name) const;
};

// Channel names are used as directory names: [A-Za-z0-9.-_]+, at most 64 characters, not "." or "..".
bool is_valid_channel_name(const std::string& name);

InputDataConfig parse_input_data_config(const nlohmann::json& document, const std::string& source);
InputDataConfig read_input_data_config(const std::filesystem::path& path);

const char* to_string(InputMode mode);
const char* to_string(S3Distribution distribution);
const char* to_string(RecordWrapper wrapper);

}  // namespace train
