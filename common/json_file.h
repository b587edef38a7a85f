// Reading the job's JSON files strictly: UTF-8 only, no duplicate keys (JSON allows them, but a file
// that says `epochs` twice is a mistake we refuse to guess about), bounded size.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <stdexcept>
#include <utility>
#include <string>
#include <string_view>

namespace train {

// Larger than any config SageMaker writes (hyperparameters are capped at 100 keys of 2,500 characters).
constexpr size_t max_config_file_bytes = 4 * 1024 * 1024;

// Deeper than any config needs (resourceconfig.json nests 4 levels; a safetensors header 3). Bounding it keeps
// the recursive copies and dumps of a parsed document from overflowing the stack on a crafted file.
constexpr int max_json_depth = 64;

// Thrown from inside nlohmann's parser by a callback of json_depth_limited(), at the first list or object
// nested deeper than max_json_depth: "it nests lists and objects more than 64 levels deep"; the caller says
// what it was parsing.
class JsonTooDeep : public std::runtime_error {
 public:
  JsonTooDeep();
};

// `callback` (none: keep everything) behind the nesting bound every JSON document train reads from outside
// has: the config files here, a hyperparameter's value, a safetensors header and the JSON in its metadata.
// nlohmann's parser itself is not recursive, but copies, dumps and messages of what it builds are: 100,000
// levels overflowed the stack.
template <typename Json>
typename Json::parser_callback_t json_depth_limited(typename Json::parser_callback_t callback = nullptr) {
  return [callback = std::move(callback)](int depth, nlohmann::json::parse_event_t event, Json& parsed) {
    using event_t = nlohmann::json::parse_event_t;
    if ((event == event_t::object_start || event == event_t::array_start) && depth >= max_json_depth) {
      throw JsonTooDeep{};
    }
    return callback ? callback(depth, event, parsed) : true;
  };
}

// Parses `text` as JSON. `source` names it in error messages (usually the file's path).
// Throws ConfigError on malformed JSON, invalid UTF-8, a duplicate key or nesting deeper than max_json_depth.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

// Reads and parses a JSON file; throws ConfigError when it cannot be read or parsed.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Reads a whole file into a string, refusing anything over `limit` bytes. Throws ConfigError.
std::string read_small_file(const std::filesystem::path& path, size_t limit);

// Throws ConfigError "<source>: expected a JSON object <what>, got <its type>" unless `document` is one: the
// top level of every config file.
void require_json_object(const nlohmann::json& document, const std::string& source, std::string_view what);

// A short description of a JSON value's type for messages: "a string", "a number", "null", ...
std::string describe_json_type(const nlohmann::json& value);

// The value as it appears in a message, cut to a readable length.
std::string quote_json_for_message(const nlohmann::json& value);

// What a message says was found: the type and the value ("an integer 5", "a string \"x\""), or just "null".
std::string describe_json_value(const nlohmann::json& value);

// `text` with every byte that is not part of valid UTF-8 written as \xNN, so a message stays printable.
std::string escape_invalid_utf8(std::string_view text);

// Cuts `text` to at most `max_bytes` bytes on a UTF-8 character boundary.
std::string cut_utf8(std::string_view text, size_t max_bytes);

}  // namespace train
