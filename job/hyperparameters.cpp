#include "job/hyperparameters.h"

#include "common/config_error.h"
#include "common/json_file.h"
#include "common/nearest_name.h"
#include "job/platform_keys.h"
#include "job/step_range.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace train {

nlohmann::json decode_hyperparameter_value(const nlohmann::json& raw) {
  if (!raw.is_string()) return raw;
  const auto& text = raw.get_ref<const std::string&>();
  // A value nested deeper than any file may be stays a string: its copies and dumps would recurse too deep.
  try {
    nlohmann::json parsed =
        nlohmann::json::parse(text, json_depth_limited<nlohmann::json>(), /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return raw;
    return parsed;
  } catch (const JsonTooDeep&) {
    return raw;
  }
}

std::string hyperparameter_key_for_message(const std::string& key) {
  constexpr size_t max_shown = 60;
  std::string dumped = nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  dumped = dumped.substr(1, dumped.size() - 2);
  if (dumped.size() > max_shown) dumped = cut_utf8(dumped, max_shown) + fmt::format("... ({} characters)", key.size());
  return dumped;
}

namespace {

std::optional<int64_t> as_integer(const nlohmann::json& value) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_unsigned()) {
    auto unsigned_value = value.get<uint64_t>();
    if (unsigned_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(unsigned_value);
  }
  if (value.is_number_float()) {
    double real = value.get<double>();
    // 10.0 is unambiguous; 10.5 or 1e30 is not an integer we can hold.
    if (std::isfinite(real) && real == std::floor(real) && std::fabs(real) < 9.0e18) return static_cast<int64_t>(real);
  }
  return std::nullopt;
}

// Strict decimal integer: digits only, no sign, no spaces inside, at most 18 digits.
std::optional<int64_t> parse_decimal(std::string text) {
  auto first = text.find_first_not_of(' ');
  auto last = text.find_last_not_of(' ');
  if (first == std::string::npos) return std::nullopt;
  text = text.substr(first, last - first + 1);
  if (text.empty() || text.size() > 18) return std::nullopt;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::stoll(text);
}

bool within_bounds(const HyperparameterSpec& spec, double value) {
  if (spec.minimum_exclusive ? value <= spec.minimum : value < spec.minimum) return false;
  if (spec.maximum_exclusive ? value >= spec.maximum : value > spec.maximum) return false;
  return true;
}

std::optional<std::vector<int64_t>> parse_integer_sequence(const nlohmann::json& decoded, const std::string& text) {
  std::vector<int64_t> numbers;
  if (decoded.is_array()) {
    for (const auto& entry : decoded) {
      auto number = as_integer(entry);
      if (!number) return std::nullopt;
      numbers.push_back(*number);
    }
    return numbers;
  }
  if (auto single = as_integer(decoded)) return std::vector<int64_t>{*single};
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    auto number = parse_decimal(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!number) return std::nullopt;
    numbers.push_back(*number);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return numbers;
}

// Converts one decoded value to the spec's type; nullopt when it does not fit.
std::optional<HyperparameterValue> convert(const HyperparameterSpec& spec, const nlohmann::json& decoded,
                                           const std::string& text) {
  using T = HyperparameterType;
  // A number the SDK was given as a string ({"epochs": "10"} arrives as "\"10\"") decodes to the string "10":
  // read it as the number it spells, as the user's argparse type=int would.
  const nlohmann::json numeric = decoded.is_string() ? decode_hyperparameter_value(decoded) : decoded;
  switch (spec.type) {
    case T::integer: {
      auto number = as_integer(numeric);
      if (!number || !within_bounds(spec, static_cast<double>(*number))) return std::nullopt;
      if (!spec.choices.empty() &&
          std::find(spec.choices.begin(), spec.choices.end(), std::to_string(*number)) == spec.choices.end()) {
        return std::nullopt;
      }
      return *number;
    }
    case T::real: {
      if (!numeric.is_number()) return std::nullopt;
      double number = numeric.get<double>();
      if (!std::isfinite(number) || !within_bounds(spec, number)) return std::nullopt;
      return number;
    }
    case T::boolean: {
      if (decoded.is_boolean()) return decoded.get<bool>();
      std::string lower = text;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      if (lower == "true") return true;
      if (lower == "false") return false;
      return std::nullopt;
    }
    case T::choice: {
      const std::string& choice = decoded.is_string() ? decoded.get_ref<const std::string&>() : text;
      if (std::find(spec.choices.begin(), spec.choices.end(), choice) == spec.choices.end()) return std::nullopt;
      return choice;
    }
    case T::text:
    case T::mpi_arguments:
      return decoded.is_string() ? decoded.get<std::string>() : text;
    case T::integer_list: {
      auto numbers = parse_integer_sequence(decoded, text);
      if (!numbers || numbers->empty()) return std::nullopt;
      for (size_t i = 0; i < numbers->size(); ++i) {
        if ((*numbers)[i] < 1 || (i > 0 && (*numbers)[i] <= (*numbers)[i - 1])) return std::nullopt;
      }
      return *numbers;
    }
    case T::image_shape: {
      auto numbers = parse_integer_sequence(decoded, text);
      if (!numbers || numbers->size() != 3 || (*numbers)[0] != 3) return std::nullopt;
      for (size_t i = 1; i < 3; ++i) {
        if ((*numbers)[i] < 16 || (*numbers)[i] > 4096) return std::nullopt;
      }
      return *numbers;
    }
    case T::step_range: {
      // "11-20" is no JSON and stays text; "15" decodes to a number: one step.
      const auto single = as_integer(numeric);
      if (!single && !decoded.is_string()) return std::nullopt;
      auto range = parse_step_range(single ? std::to_string(*single) : decoded.get_ref<const std::string&>());
      if (!range) return std::nullopt;
      return std::vector<int64_t>{range->first, range->last};
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> Hyperparameters::custom_mpi_words() const {
  return split_shell_words(custom_mpi_options, "hyperparameter `custom_mpi_options`");
}

CustomMpiOptions Hyperparameters::mpi_options() const {
  return parse_custom_mpi_options(custom_mpi_options, "hyperparameter `custom_mpi_options`");
}

nlohmann::json Hyperparameters::effective() const {
  nlohmann::json result = nlohmann::json::object();
  for (const auto& spec : hyperparameter_schema()) {
    if (workload_ == Workload::user_command && !spec.launcher) continue;  // a user command's key
    result[std::string(spec.name)] = spec.field.show(*this);
  }
  return result;
}

Hyperparameters parse_hyperparameters(const nlohmann::json& document, const std::string& source,
                                      Workload workload, const PythonValue* toolkit_document) {
  require_json_object(document, source, "mapping hyperparameter names to string values");
  Hyperparameters result;
  result.workload_ = workload;
  ConfigProblems problems;
  std::map<std::string, std::string> given_through;  // schema name -> the key that set it
  std::map<std::string, HyperparameterValue> checked;  // schema name -> its value, for an alias's comparison

  // The keys this workload reads: every schema key for train's own training, the launcher's for a command.
  std::vector<std::string_view> known_names;
  for (const auto& spec : hyperparameter_schema()) {
    if (workload == Workload::train_resnet || spec.launcher) known_names.push_back(spec.name);
  }

  if (toolkit_document != nullptr && toolkit_document->kind == PythonValue::Kind::dict) {
    for (const auto& [key, raw] : toolkit_document->entries) {
      result.toolkit_values_.entries.emplace_back(key, decode_toolkit_value(raw));
    }
  } else {
    for (const auto& [key, raw] : document.items()) {
      result.toolkit_values_.entries.emplace_back(key, decode_toolkit_value(python_value_from_json(raw)));
    }
  }
  for (const auto& [key, raw] : document.items()) {
    nlohmann::json decoded = decode_hyperparameter_value(raw);
    result.decoded_[key] = decoded;

    std::string name = key;
    for (const auto& alias : hyperparameter_aliases()) {
      if (key == alias.alias) name = alias.name;
    }
    if (name == key && is_platform_key(key)) continue;  // the platform's own settings (job/platform_keys.h)

    const HyperparameterSpec* spec = find_hyperparameter(name);
    if (workload == Workload::user_command && (spec == nullptr || !spec->launcher)) continue;  // the command's own
    if (spec == nullptr) {
      problems.add(fmt::format("hyperparameter `{}` is not known; did you mean `{}`? (`train hyperparameters` lists "
                               "them all)",
                               hyperparameter_key_for_message(key),
                               // Real names are short; comparing a huge key in full would only cost time.
                               nearest_name(std::string_view(key).substr(0, 64), known_names)));
      continue;
    }
    // The value as text: what it decodes to when that is a string (the SDK sends "30,60" as "\"30,60\""),
    // else the raw string ("0.1", "sgd"), else the JSON of a non-string value.
    std::string text = decoded.is_string() ? decoded.get<std::string>()
                       : raw.is_string()   ? raw.get<std::string>()
                                           : raw.dump();
    auto value = convert(*spec, decoded, text);
    if (!value) {
      problems.add(fmt::format("hyperparameter `{}`: expected {}, got {}", key, describe_expected(*spec),
                               quote_json_for_message(raw)));
      continue;
    }
    if (spec->type == HyperparameterType::mpi_arguments) {
      try {
        parse_custom_mpi_options(std::get<std::string>(*value), fmt::format("hyperparameter `{}`", key));
      } catch (const ConfigError& error) {
        problems.add(error.what());
        continue;
      }
    }
    if (auto earlier = given_through.find(name); earlier != given_through.end()) {
      if (checked[name] != *value) {
        problems.add(fmt::format("hyperparameters `{}` and `{}` mean the same setting but have different values; "
                                 "set only one",
                                 earlier->second, key));
      }
      continue;
    }
    given_through[name] = key;
    checked[name] = *value;
    result.given_.insert(name);
  }
  problems.throw_if_any();

  // Every field gets its value: what the job gave, else the schema's default (a key without one stays empty).
  // A user command's file is read for the launcher's keys only; train's own keep their defaults.
  for (const auto& spec : hyperparameter_schema()) {
    std::string name(spec.name);
    if (checked.count(name) == 0 && spec.default_value) {
      auto value = convert(spec, decode_hyperparameter_value(nlohmann::json(std::string(*spec.default_value))),
                           std::string(*spec.default_value));
      if (!value) throw std::logic_error("schema default does not validate: " + name);
      checked[name] = *value;
    }
    if (auto value = checked.find(name); value != checked.end()) spec.field.store(result, value->second);
  }
  return result;
}

Hyperparameters read_hyperparameters(const std::filesystem::path& path, Workload workload) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    return parse_hyperparameters(nlohmann::json::object(), path.string(), workload);
  }
  const std::string text = read_small_file(path, max_config_file_bytes);
  auto document = parse_json_text(text, path.string());
  // The file as Python reads it; the checks above already refused what Python would not read.
  const std::optional<PythonValue> toolkit_document = python_json_loads(text);
  // Prefix messages with the file so the user knows where to look.
  try {
    return parse_hyperparameters(document, path.string(), workload, toolkit_document ? &*toolkit_document : nullptr);
  } catch (const ConfigError& problem) {
    std::string message = problem.what();
    std::string prefixed;
    size_t start = 0;
    while (start <= message.size()) {
      size_t end = message.find('\n', start);
      std::string line = message.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (line.rfind(path.string(), 0) != 0) line = path.string() + ": " + line;
      prefixed += (prefixed.empty() ? "" : "\n") + line;
      if (end == std::string::npos) break;
      start = end + 1;
    }
    throw ConfigError(prefixed);
  }
}

}  // namespace train
