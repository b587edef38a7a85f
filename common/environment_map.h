// The process environment as a value, so that job detection and SM_* export can be tested without
// touching the real environment.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace train {

using EnvironmentMap = std::map<std::string, std::string>;

EnvironmentMap current_environment();

// nullopt when absent; an empty value counts as absent (as shells usually mean it).
std::optional<std::string> lookup(const EnvironmentMap& environment, const std::string& name);

// "NAME=value" strings for execve.
std::vector<std::string> to_envp_strings(const EnvironmentMap& environment);

}  // namespace train
