// The cluster description: the same shape whether the job came from SageMaker's resourceconfig.json,
// AWS Batch multi-node variables, or nothing at all (a local run). Every host computes it the same way,
// so every host agrees on the master without talking (how the master is chosen: job/master_election.h).
#pragma once

#include "common/environment_map.h"
#include "job/resource_config.h"

#include <optional>
#include <string>
#include <vector>

namespace train {

enum class JobPlatform { sagemaker, aws_batch, local };
const char* to_string(JobPlatform platform);

struct BatchNodeInfo {
  int node_index = 0;
  int main_node_index = 0;
  int num_nodes = 1;
  std::string main_node_address;  // empty on the main node: AWS Batch sets it only on children
  // The job's identity, which every node's registration carries: AWS_BATCH_JOB_ID without the "#N" that
  // names one node of a multi-node job (the same on every node of the job).
  std::string job_id;
};

struct ClusterDescription {
  JobPlatform platform = JobPlatform::local;
  std::vector<std::string> hosts;  // the hosts that train, in rank order: the master first (job/master_election.h)
  // Every host of the job. Hosts outside `hosts` (instance groups left out of the distribution on a
  // heterogeneous SageMaker cluster: job/training_hosts.h) run no rank; they wait for the job's end.
  std::vector<std::string> all_hosts;
  std::string current_host;
  std::string master_host;
  std::string network_interface = "eth0";
  std::optional<BatchNodeInfo> batch;  // set for AWS Batch multi-node jobs

  bool is_master() const { return current_host == master_host; }
  bool single_host() const { return hosts.size() == 1; }
  bool trains_here() const;
};

// SageMaker: every host of resourceconfig.json trains.
ClusterDescription cluster_from_sagemaker(const ResourceConfig& config);

// AWS Batch multi-node: hosts are named "node-<index>" until the main node learns their addresses. Throws
// ConfigError naming the variable that is missing or wrong.
ClusterDescription cluster_from_batch(const EnvironmentMap& environment);

// No job description: this host alone.
ClusterDescription cluster_for_local_host(const std::string& host_name);

// True when the variables of an AWS Batch multi-node job are present.
bool is_batch_multinode(const EnvironmentMap& environment);

// This machine's host name (gethostname), "localhost" if it has none.
std::string local_host_name();

}  // namespace train
