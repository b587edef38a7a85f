// Heterogeneous clusters. A SageMaker job may run instance groups of different types (resourceconfig.json's
// `instance_groups`), and the distribution names the groups that train (the toolkit's
// `sagemaker_distribution_instance_groups`). Only those groups' hosts get ranks, and the master is one of
// them (job/master_election.h); every other host runs nothing and waits for the job's end.
#pragma once

#include "job/cluster.h"
#include "job/python_value.h"
#include "job/resource_config.h"

#include <optional>
#include <string>
#include <vector>

namespace train {

// The toolkit's distribution instance groups (its Environment.distribution_instance_groups).
struct DistributionGroups {
  PythonValue value;               // as SM_DISTRIBUTION_INSTANCE_GROUPS says it
  std::vector<std::string> names;  // the groups, when they are names
  bool named_by_job = false;       // sagemaker_distribution_instance_groups set them
};

// The hyperparameter sagemaker_distribution_instance_groups when it is set; else this host's own group
// when the job enables a distribution (sagemaker_mpi_enabled and the toolkit's other *_enabled keys, as
// Python's truth sees them); else none. `hyperparameters` are the toolkit's values (Hyperparameters::
// toolkit_values), `config` the resource config when there is one.
DistributionGroups distribution_groups(const PythonValue& hyperparameters, const std::optional<ResourceConfig>& config);

// The toolkit's distribution_hosts: the hosts of `groups`, group by group in the order of
// resourceconfig.json and each group's hosts as written there (not sorted); every host of `all_hosts` when
// there is no resource config or it lists no instance groups.
std::vector<std::string> distribution_hosts(const std::optional<ResourceConfig>& config,
                                            const std::vector<std::string>& groups,
                                            const std::vector<std::string>& all_hosts);

// Restricts cluster.hosts to distribution_hosts(groups), in that order, and elects the master among them
// (job/master_election.h). Each group must be one of config's instance groups (throws ConfigError
// naming the groups there are otherwise). A job whose resourceconfig.json lists no instance groups trains on
// every host, as the toolkit does; a note about that goes to `warnings`.
void select_training_hosts(ClusterDescription& cluster, const ResourceConfig& config,
                           const std::vector<std::string>& groups, std::vector<std::string>& warnings);

}  // namespace train
