#include "job/input_data_config.h"

#include "common/config_error.h"
#include "common/enum_names.h"
#include "common/json_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace train {

const Channel* InputDataConfig::find(const std::string& name) const {
  for (const auto& channel : channels) {
    if (channel.name == name) return &channel;
  }
  return nullptr;
}

bool is_valid_channel_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == '_';
  });
}

namespace {

// The spellings of inputdataconfig.json (and of SM_CHANNEL_* descriptions in SM_INPUT_DATA_CONFIG).
constexpr EnumName<InputMode> input_modes[] = {
    {InputMode::file, "File"}, {InputMode::pipe, "Pipe"}, {InputMode::fast_file, "FastFile"}};
constexpr EnumName<S3Distribution> s3_distributions[] = {{S3Distribution::fully_replicated, "FullyReplicated"},
                                                         {S3Distribution::sharded_by_s3_key, "ShardedByS3Key"}};
constexpr EnumName<RecordWrapper> record_wrappers[] = {{RecordWrapper::none, "None"},
                                                       {RecordWrapper::recordio, "RecordIO"}};

}  // namespace

const char* to_string(InputMode mode) { return name_of(input_modes, mode); }
const char* to_string(S3Distribution distribution) { return name_of(s3_distributions, distribution); }
const char* to_string(RecordWrapper wrapper) { return name_of(record_wrappers, wrapper); }

namespace {

// Reads an optional enumerated string field of a channel, one of `names`.
template <typename Enum, size_t N>
Enum parse_choice(const nlohmann::json& channel, const char* key, const EnumName<Enum> (&names)[N], Enum fallback,
                  const std::string& where) {
  auto it = channel.find(key);
  if (it == channel.end() || it->is_null()) return fallback;
  if (it->is_string()) {
    if (auto value = value_named(names, it->get_ref<const std::string&>())) return *value;
  }
  throw ConfigError(fmt::format("{}: \"{}\": expected {}, got {}", where, key, names_listed(names, "\""),
                                describe_json_value(*it)));
}

// One channel's settings; throws ConfigError naming the channel and the field.
Channel parse_channel(const std::string& name, const nlohmann::json& settings, const std::string& source) {
  std::string where = fmt::format("{}: channel \"{}\"", source, name);
  if (!settings.is_object()) {
    throw ConfigError(fmt::format("{}: expected an object such as {{\"TrainingInputMode\": \"File\"}}, got {}",
                                  where, describe_json_value(settings)));
  }
  Channel channel;
  channel.name = name;
  channel.mode = parse_choice(settings, "TrainingInputMode", input_modes, InputMode::file, where);
  channel.distribution =
      parse_choice(settings, "S3DistributionType", s3_distributions, S3Distribution::fully_replicated, where);
  channel.record_wrapper = parse_choice(settings, "RecordWrapperType", record_wrappers, RecordWrapper::none, where);
  if (auto type = settings.find("ContentType"); type != settings.end() && !type->is_null()) {
    if (!type->is_string()) {
      throw ConfigError(fmt::format("{}: \"ContentType\": expected a string such as \"application/x-image\", got {}",
                                    where, describe_json_value(*type)));
    }
    channel.content_type = type->get<std::string>();
  }
  return channel;
}

}  // namespace

InputDataConfig parse_input_data_config(const nlohmann::json& document, const std::string& source) {
  require_json_object(document, source, "mapping channel names to their settings");
  InputDataConfig config;
  config.document = document;
  ConfigProblems problems;  // every channel's problems at once, as `train validate` promises
  for (const auto& [name, settings] : document.items()) {
    if (!is_valid_channel_name(name)) {
      problems.add(fmt::format("{}: channel name {} is not allowed: use 1-64 letters, digits, '.', '-' or '_' "
                               "(it becomes a directory under input/data)",
                               source, quote_json_for_message(nlohmann::json(name))));
      continue;
    }
    try {
      config.channels.push_back(parse_channel(name, settings, source));
    } catch (const ConfigError& error) {
      problems.add(error.what());
    }
  }
  problems.throw_if_any();
  std::sort(config.channels.begin(), config.channels.end(),
            [](const Channel& a, const Channel& b) { return a.name < b.name; });
  return config;
}

InputDataConfig read_input_data_config(const std::filesystem::path& path) {
  return parse_input_data_config(read_json_file(path), path.string());
}

}  // namespace train
