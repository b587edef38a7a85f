// The process environment as a value, so that job detection and SM_* export can be tested without
// touching the real environment.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train {

using EnvironmentMap = std::map<std::string, std::string>;

EnvironmentMap current_environment();

// nullopt when absent; an empty value counts as absent (as shells usually mean it).
std::optional<std::string> lookup(const EnvironmentMap& environment, const std::string& name);

// The whole number in variable `name`: nullopt when absent; a ConfigError "environment variable NAME:
// expected EXPECTED, got "VALUE"" when it is not digits only or lies outside [minimum, maximum]
// (`expected` says what is wanted, as "a whole number of seconds such as 100").
std::optional<int64_t> whole_number_from_environment(const EnvironmentMap& environment, const std::string& name,
                                                     int64_t minimum, int64_t maximum, std::string_view expected);

// "NAME=value" strings for execve.
std::vector<std::string> to_envp_strings(const EnvironmentMap& environment);

}  // namespace train
