#include "job/training_hosts.h"

#include "common/config_error.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace train {

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
  std::set<std::string> training;
  for (const auto& name : groups) {
    auto group = std::find_if(config.instance_groups.begin(), config.instance_groups.end(),
                              [&](const InstanceGroup& candidate) { return candidate.name == name; });
    if (group == config.instance_groups.end()) {
      throw ConfigError(fmt::format("hyperparameter `sagemaker_distribution_instance_groups` names the instance "
                                    "group \"{}\", but resourceconfig.json's instance groups are {}; name groups of "
                                    "the job's heterogeneous cluster",
                                    name, known.empty() ? "none" : fmt::format("\"{}\"", fmt::join(known, "\", \""))));
    }
    training.insert(group->hosts.begin(), group->hosts.end());
  }
  if (training.empty()) {
    throw ConfigError(fmt::format("hyperparameter `sagemaker_distribution_instance_groups`: the groups {} have no "
                                  "hosts in resourceconfig.json, so no host would train",
                                  fmt::join(groups, ", ")));
  }
  // Sorted as SageMaker sorts `hosts`, so that every host elects the same master.
  cluster.hosts.assign(training.begin(), training.end());
  cluster.master_host = cluster.hosts.front();
}

}  // namespace train
