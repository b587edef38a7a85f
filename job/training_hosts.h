// Heterogeneous clusters. A SageMaker job may run instance groups of different types (resourceconfig.json's
// `instance_groups`), and the distribution names the groups that train (the toolkit's
// `sagemaker_distribution_instance_groups`). Only those groups' hosts get ranks; the master is the first of
// them in sorted order; every other host runs nothing and waits for the job's end.
#pragma once

#include "job/cluster.h"
#include "job/resource_config.h"

#include <string>
#include <vector>

namespace train {

// Restricts cluster.hosts to the hosts of `groups`, each of which must be one of config's instance groups
// (throws ConfigError naming the groups there are otherwise). A job whose resourceconfig.json lists no
// instance groups trains on every host, as the toolkit does; a note about that goes to `warnings`.
void select_training_hosts(ClusterDescription& cluster, const ResourceConfig& config,
                           const std::vector<std::string>& groups, std::vector<std::string>& warnings);

}  // namespace train
