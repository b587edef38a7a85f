#include "job/cluster.h"

#include "common/config_error.h"
#include "common/enum_names.h"
#include "common/json_file.h"
#include "job/master_election.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace train {

namespace {

constexpr EnumName<JobPlatform> platforms[] = {{JobPlatform::sagemaker, "SageMaker"},
                                               {JobPlatform::aws_batch, "AWS Batch multi-node"},
                                               {JobPlatform::local, "local"}};

}  // namespace

const char* to_string(JobPlatform platform) { return name_of(platforms, platform); }

bool ClusterDescription::trains_here() const {
  return std::find(hosts.begin(), hosts.end(), current_host) != hosts.end();
}

ClusterDescription cluster_from_sagemaker(const ResourceConfig& config) {
  ClusterDescription cluster;
  cluster.platform = JobPlatform::sagemaker;
  cluster.all_hosts = config.hosts;
  cluster.current_host = config.current_host;
  cluster.network_interface = config.network_interface_name;
  elect_master(cluster);
  return cluster;
}

bool is_batch_multinode(const EnvironmentMap& environment) {
  return lookup(environment, "AWS_BATCH_JOB_NUM_NODES").has_value() ||
         lookup(environment, "AWS_BATCH_JOB_NODE_INDEX").has_value();
}

namespace {

int read_index(const EnvironmentMap& environment, const std::string& name, int minimum, int maximum,
               const std::string& meaning) {
  auto value = lookup(environment, name);
  if (!value) {
    throw ConfigError(fmt::format("environment variable {} is not set; AWS Batch sets it on every node of a "
                                  "multi-node parallel job ({})",
                                  name, meaning));
  }
  bool digits = !value->empty() && value->size() <= 9 &&
                value->find_first_not_of("0123456789") == std::string::npos;
  int number = digits ? std::stoi(*value) : -1;
  if (!digits || number < minimum || number > maximum) {
    throw ConfigError(fmt::format("environment variable {}: expected an integer from {} to {} ({}), got {}", name,
                                  minimum, maximum, meaning, quote_json_for_message(nlohmann::json(*value))));
  }
  return number;
}

// AWS_BATCH_JOB_ID's main part: Batch names node N of a multi-node job "<job id>#N".
std::string read_job_id(const EnvironmentMap& environment) {
  auto value = lookup(environment, "AWS_BATCH_JOB_ID");
  std::string main_part = value ? value->substr(0, value->find('#')) : std::string();
  bool printable = std::all_of(main_part.begin(), main_part.end(), [](unsigned char c) { return c > ' ' && c < 127; });
  if (main_part.empty() || main_part.size() > 256 || !printable) {
    throw ConfigError(fmt::format(
        "environment variable AWS_BATCH_JOB_ID: expected the job's ID (AWS Batch sets it on every node; the nodes of "
        "a multi-node job register with the main node under it), got {}",
        value ? quote_json_for_message(nlohmann::json(*value)) : std::string("nothing")));
  }
  return main_part;
}

}  // namespace

ClusterDescription cluster_from_batch(const EnvironmentMap& environment) {
  BatchNodeInfo info;
  info.num_nodes = read_index(environment, "AWS_BATCH_JOB_NUM_NODES", 1, 10000, "the number of nodes");
  info.node_index = read_index(environment, "AWS_BATCH_JOB_NODE_INDEX", 0, info.num_nodes - 1, "this node's index");
  info.main_node_index =
      read_index(environment, "AWS_BATCH_JOB_MAIN_NODE_INDEX", 0, info.num_nodes - 1, "the main node's index");
  if (info.node_index != info.main_node_index) {
    auto address = lookup(environment, "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS");
    in_addr parsed{};
    if (!address || inet_pton(AF_INET, address->c_str(), &parsed) != 1) {
      throw ConfigError(fmt::format(
          "environment variable AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS: expected the main node's IPv4 address "
          "(AWS Batch sets it on child nodes), got {}",
          address ? quote_json_for_message(nlohmann::json(*address)) : std::string("nothing")));
    }
    info.main_node_address = *address;
  }
  if (info.num_nodes > 1) info.job_id = read_job_id(environment);
  ClusterDescription cluster;
  cluster.platform = JobPlatform::aws_batch;
  for (int index = 0; index < info.num_nodes; ++index) cluster.all_hosts.push_back(fmt::format("node-{}", index));
  cluster.current_host = cluster.all_hosts.at(static_cast<size_t>(info.node_index));
  cluster.batch = info;
  elect_master(cluster);
  return cluster;
}

ClusterDescription cluster_for_local_host(const std::string& host_name) {
  ClusterDescription cluster;
  cluster.platform = JobPlatform::local;
  cluster.all_hosts = {host_name};
  cluster.current_host = host_name;
  elect_master(cluster);
  return cluster;
}

std::string local_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace train
