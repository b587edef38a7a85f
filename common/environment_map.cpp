#include "common/environment_map.h"

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

std::vector<std::string> to_envp_strings(const EnvironmentMap& environment) {
  std::vector<std::string> strings;
  strings.reserve(environment.size());
  for (const auto& [name, value] : environment) strings.push_back(name + "=" + value);
  return strings;
}

}  // namespace train
