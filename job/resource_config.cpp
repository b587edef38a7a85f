#include "job/resource_config.h"

#include "common/config_error.h"
#include "common/json_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace train {

bool is_valid_host_name(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
  });
}

bool is_valid_interface_name(const std::string& name) {
  // Linux: IFNAMSIZ is 16 including the terminator; '/', ':' aliases aside, no white space.
  if (name.empty() || name.size() > 15 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return c > ' ' && c < 0x7f && c != '/';
  });
}

namespace {

std::string found(const nlohmann::json& value) { return describe_json_value(value); }

std::vector<std::string> parse_host_list(const nlohmann::json& value, const std::string& where,
                                         const std::string& source) {
  if (!value.is_array() || value.empty()) {
    throw ConfigError(fmt::format("{}: {}: expected a non-empty list of host names such as [\"algo-1\", \"algo-2\"], "
                                  "got {}",
                                  source, where, value.is_array() ? std::string("an empty list") : found(value)));
  }
  std::vector<std::string> hosts;
  std::map<std::string, std::string> seen;  // lower-cased -> as listed: DNS names ignore letter case
  for (size_t i = 0; i < value.size(); ++i) {
    const auto& entry = value[i];
    if (!entry.is_string() || !is_valid_host_name(entry.get<std::string>())) {
      throw ConfigError(fmt::format("{}: {}[{}]: expected a host name (1-253 letters, digits, '-', '.', '_'), got {}",
                                    source, where, i, found(entry)));
    }
    const auto& host = entry.get_ref<const std::string&>();
    std::string folded = host;
    std::transform(folded.begin(), folded.end(), folded.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
    if (auto [first, added] = seen.emplace(folded, host); !added) {
      if (first->second == host) {
        throw ConfigError(fmt::format("{}: {}: host \"{}\" is listed more than once; every host must appear once",
                                      source, where, host));
      }
      throw ConfigError(fmt::format("{}: {}: hosts \"{}\" and \"{}\" differ only in letter case, and host names do "
                                    "not (DNS ignores case), so they name one host twice; every host must appear once",
                                    source, where, first->second, host));
    }
    hosts.push_back(host);
  }
  return hosts;
}

std::string optional_string(const nlohmann::json& document, const char* key, const std::string& source) {
  auto it = document.find(key);
  if (it == document.end() || it->is_null()) return {};
  if (!it->is_string()) {
    throw ConfigError(fmt::format("{}: \"{}\": expected a string, got {}", source, key, found(*it)));
  }
  return it->get<std::string>();
}

}  // namespace

ResourceConfig parse_resource_config(const nlohmann::json& document, const std::string& source) {
  require_json_object(document, source, "with \"current_host\" and \"hosts\"");
  ResourceConfig config;
  config.document = document;

  auto current = document.find("current_host");
  if (current == document.end()) {
    throw ConfigError(fmt::format("{}: missing required key \"current_host\" (this host's name, e.g. \"algo-1\")",
                                  source));
  }
  if (!current->is_string() || !is_valid_host_name(current->get<std::string>())) {
    throw ConfigError(fmt::format(
        "{}: \"current_host\": expected a host name (1-253 letters, digits, '-', '.', '_'), got {}", source,
        found(*current)));
  }
  config.current_host = current->get<std::string>();

  auto hosts = document.find("hosts");
  if (hosts == document.end()) {
    throw ConfigError(fmt::format("{}: missing required key \"hosts\" (every host of the job, e.g. [\"algo-1\"])",
                                  source));
  }
  config.hosts = parse_host_list(*hosts, "\"hosts\"", source);
  if (std::find(config.hosts.begin(), config.hosts.end(), config.current_host) == config.hosts.end()) {
    throw ConfigError(fmt::format("{}: \"current_host\" \"{}\" is not one of \"hosts\" {}; it must be listed there",
                                  source, config.current_host, quote_json_for_message(*hosts)));
  }

  if (auto interface = document.find("network_interface_name");
      interface != document.end() && !interface->is_null()) {
    if (!interface->is_string() || !is_valid_interface_name(interface->get<std::string>())) {
      throw ConfigError(fmt::format("{}: \"network_interface_name\": expected an interface name such as \"eth0\" "
                                    "(1-15 characters, no '/' or spaces), got {}",
                                    source, found(*interface)));
    }
    config.network_interface_name = interface->get<std::string>();
  }
  config.current_instance_type = optional_string(document, "current_instance_type", source);
  config.current_group_name = optional_string(document, "current_group_name", source);

  if (auto groups = document.find("instance_groups"); groups != document.end() && !groups->is_null()) {
    if (!groups->is_array()) {
      throw ConfigError(fmt::format("{}: \"instance_groups\": expected a list of groups, got {}", source,
                                    found(*groups)));
    }
    for (size_t i = 0; i < groups->size(); ++i) {
      const auto& entry = (*groups)[i];
      std::string where = fmt::format("\"instance_groups\"[{}]", i);
      if (!entry.is_object()) {
        throw ConfigError(fmt::format("{}: {}: expected an object with \"instance_group_name\" and \"hosts\", got {}",
                                      source, where, found(entry)));
      }
      InstanceGroup group;
      group.name = optional_string(entry, "instance_group_name", source + ": " + where);
      group.instance_type = optional_string(entry, "instance_type", source + ": " + where);
      if (auto group_hosts = entry.find("hosts"); group_hosts != entry.end()) {
        group.hosts = parse_host_list(*group_hosts, where + "[\"hosts\"]", source);
        for (const auto& host : group.hosts) {
          if (std::find(config.hosts.begin(), config.hosts.end(), host) == config.hosts.end()) {
            throw ConfigError(fmt::format("{}: {}: host \"{}\" is not one of \"hosts\"", source, where, host));
          }
        }
      }
      config.instance_groups.push_back(std::move(group));
    }
  }
  return config;
}

ResourceConfig read_resource_config(const std::filesystem::path& path) {
  return parse_resource_config(read_json_file(path), path.string());
}

}  // namespace train
