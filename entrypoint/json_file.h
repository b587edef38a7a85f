// Reading the job's JSON files strictly: UTF-8 only, no duplicate keys (JSON allows them, but a file
// that says `epochs` twice is a mistake we refuse to guess about), bounded size.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <string_view>

namespace train {

// Larger than any config SageMaker writes (hyperparameters are capped at 100 keys of 2,500 characters).
constexpr size_t max_config_file_bytes = 4 * 1024 * 1024;

// Parses `text` as JSON. `source` names it in error messages (usually the file's path).
// Throws ConfigError on malformed JSON, invalid UTF-8 or a duplicate key.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

// Reads and parses a JSON file; throws ConfigError when it cannot be read or parsed.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Reads a whole file into a string, refusing anything over `limit` bytes. Throws ConfigError.
std::string read_small_file(const std::filesystem::path& path, size_t limit);

// A short description of a JSON value's type for messages: "a string", "a number", "null", ...
std::string describe_json_type(const nlohmann::json& value);

// The value as it appears in a message, cut to a readable length.
std::string quote_json_for_message(const nlohmann::json& value);

}  // namespace train
