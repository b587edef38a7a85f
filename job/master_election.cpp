#include "job/master_election.h"

#include <algorithm>

namespace train {

void elect_master(ClusterDescription& cluster, const std::vector<std::string>& training_hosts) {
  switch (cluster.platform) {
    case JobPlatform::sagemaker:
      std::sort(cluster.all_hosts.begin(), cluster.all_hosts.end());
      cluster.hosts = training_hosts.empty() ? cluster.all_hosts : training_hosts;
      break;
    case JobPlatform::aws_batch: {
      const std::string main_node = cluster.all_hosts.at(static_cast<size_t>(cluster.batch->main_node_index));
      std::stable_partition(cluster.all_hosts.begin(), cluster.all_hosts.end(),
                            [&](const std::string& host) { return host == main_node; });
      cluster.hosts = cluster.all_hosts;
      break;
    }
    case JobPlatform::local:
      cluster.hosts = cluster.all_hosts;
      break;
  }
  cluster.master_host = cluster.hosts.front();
}

}  // namespace train
