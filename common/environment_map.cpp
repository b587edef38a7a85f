#include "common/environment_map.h"

#include "common/config_error.h"

#include <fmt/format.h>
#include <unistd.h>

namespace train {

EnvironmentMap current_environment() {
  EnvironmentMap environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string text(*entry);
    auto equals = text.find('=');
    if (equals == std::string::npos) continue;
    environment.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return environment;
}

std::optional<std::string> lookup(const EnvironmentMap& environment, const std::string& name) {
  auto it = environment.find(name);
  if (it == environment.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> whole_number_from_environment(const EnvironmentMap& environment, const std::string& name,
                                                     int64_t minimum, int64_t maximum, std::string_view expected) {
  auto value = lookup(environment, name);
  if (!value) return std::nullopt;
  // At most 18 digits: any such number fits in int64_t.
  const bool digits = value->size() <= 18 && value->find_first_not_of("0123456789") == std::string::npos;
  const int64_t number = digits ? std::stoll(*value) : -1;
  if (!digits || number < minimum || number > maximum) {
    throw ConfigError(fmt::format("environment variable {}: expected {}, got \"{}\"", name, expected, *value));
  }
  return number;
}

std::vector<std::string> to_envp_strings(const EnvironmentMap& environment) {
  std::vector<std::string> strings;
  strings.reserve(environment.size());
  for (const auto& [name, value] : environment) strings.push_back(name + "=" + value);
  return strings;
}

}  // namespace train
