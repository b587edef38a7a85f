#include "job/training_hosts.h"

#include "common/config_error.h"
#include "job/master_election.h"

#include <fmt/format.h>

#include <algorithm>

namespace train {

namespace {

// Python's truth of a value: what `if value:` decides.
bool python_truth(const PythonValue& value) {
  using Kind = PythonValue::Kind;
  switch (value.kind) {
    case Kind::none: return false;
    case Kind::boolean: return value.flag;
    case Kind::integer: return value.text != "0";
    case Kind::real: return value.real != 0;  // NaN is true in Python too
    case Kind::string: return !value.text.empty();
    case Kind::list: return !value.items.empty();
    case Kind::dict: return !value.entries.empty();
  }
  return false;
}

}  // namespace

DistributionGroups distribution_groups(const PythonValue& hyperparameters, const std::optional<ResourceConfig>& config) {
  DistributionGroups groups;
  groups.value.kind = PythonValue::Kind::list;
  if (const PythonValue* named = find_entry(hyperparameters, "sagemaker_distribution_instance_groups")) {
    groups.value = *named;
    groups.named_by_job = true;
    if (named->is_string()) groups.names.push_back(named->text);
    for (const auto& item : named->items) {
      if (item.is_string()) groups.names.push_back(item.text);
    }
    return groups;
  }
  // The toolkit's get_distribution_instance_groups_from_resource_config.
  for (const char* enabled : {"sagemaker_mpi_enabled", "sagemaker_parameter_server_enabled",
                              "sagemaker_distributed_dataparallel_enabled", "sagemaker_pytorch_ddp_enabled",
                              "sagemaker_pytorch_xla_multi_worker_enabled",
                              "sagemaker_multi_worker_mirrored_strategy_enabled", "sagemaker_torch_distributed_enabled"}) {
    const PythonValue* flag = find_entry(hyperparameters, enabled);
    if (flag != nullptr && python_truth(*flag)) {
      const std::string own = config && !config->current_group_name.empty() ? config->current_group_name
                                                                            : "homogeneousCluster";
      groups.names.push_back(own);
      groups.value.items.push_back(PythonValue::make_string(own));
      break;
    }
  }
  return groups;
}

std::vector<std::string> distribution_hosts(const std::optional<ResourceConfig>& config,
                                            const std::vector<std::string>& groups,
                                            const std::vector<std::string>& all_hosts) {
  if (!config || config->instance_groups.empty()) return all_hosts;  // the toolkit's "local mode"
  std::vector<std::string> hosts;
  for (const auto& group : config->instance_groups) {
    if (std::find(groups.begin(), groups.end(), group.name) != groups.end()) {
      hosts.insert(hosts.end(), group.hosts.begin(), group.hosts.end());
    }
  }
  return hosts;
}

void select_training_hosts(ClusterDescription& cluster, const ResourceConfig& config,
                           const std::vector<std::string>& groups, std::vector<std::string>& warnings) {
  if (config.instance_groups.empty()) {
    warnings.push_back(fmt::format("hyperparameter sagemaker_distribution_instance_groups names {} but "
                                   "resourceconfig.json lists no instance groups; every host trains",
                                   fmt::join(groups, ", ")));
    return;
  }
  std::vector<std::string> known;
  for (const auto& group : config.instance_groups) known.push_back(group.name);
  for (const auto& name : groups) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw ConfigError(fmt::format("hyperparameter `sagemaker_distribution_instance_groups` names the instance "
                                    "group \"{}\", but resourceconfig.json's instance groups are {}; name groups of "
                                    "the job's heterogeneous cluster",
                                    name, known.empty() ? "none" : fmt::format("\"{}\"", fmt::join(known, "\", \""))));
    }
  }
  std::vector<std::string> training;
  for (const auto& host : distribution_hosts(config, groups, config.hosts)) {
    if (std::find(training.begin(), training.end(), host) == training.end()) training.push_back(host);
  }
  if (training.empty()) {
    throw ConfigError(fmt::format("hyperparameter `sagemaker_distribution_instance_groups`: the groups {} have no "
                                  "hosts in resourceconfig.json, so no host would train",
                                  fmt::join(groups, ", ")));
  }
  elect_master(cluster, training);
}

}  // namespace train
