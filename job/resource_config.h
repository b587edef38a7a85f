// resourceconfig.json: which hosts the job has and which one this is.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace train {

struct InstanceGroup {
  std::string name;
  std::string instance_type;
  std::vector<std::string> hosts;  // as written: SageMaker does not sort these
};

struct ResourceConfig {
  std::string current_host;
  std::vector<std::string> hosts;  // as written: SageMaker sorts them, and so does the master election
  std::string network_interface_name = "eth0";
  std::string current_instance_type;   // empty when absent
  std::string current_group_name;      // empty when absent
  std::vector<InstanceGroup> instance_groups;
  nlohmann::json document;             // the file as read, for SM_RESOURCE_CONFIG
};

// Validates a parsed resourceconfig.json. `source` names the file in messages. Throws ConfigError.
ResourceConfig parse_resource_config(const nlohmann::json& document, const std::string& source);

ResourceConfig read_resource_config(const std::filesystem::path& path);

// True when `name` is usable as a host name: 1-253 characters of letters, digits, '-', '.', '_'.
bool is_valid_host_name(const std::string& name);

// True when `name` can be a Linux network interface name (1-15 characters, no '/', no white space).
bool is_valid_interface_name(const std::string& name);

}  // namespace train
