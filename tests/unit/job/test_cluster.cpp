// The cluster description: AWS Batch multi-node variables, SageMaker's resourceconfig and a local run all
// give the same shape; bad Batch variables give exact messages.
#include "common/environment_map.h"
#include "job/cluster.h"
#include "job/resource_config.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace train;
using train::testing::config_error_message;

namespace {

EnvironmentMap batch_environment(const std::string& num_nodes, const std::string& node_index,
                                 const std::string& main_index) {
  return {{"AWS_BATCH_JOB_NUM_NODES", num_nodes},
          {"AWS_BATCH_JOB_NODE_INDEX", node_index},
          {"AWS_BATCH_JOB_MAIN_NODE_INDEX", main_index},
          {"AWS_BATCH_JOB_ID", "0123-4567#1"}};
}

// What every platform must agree on.
void check_shape(const ClusterDescription& cluster, const std::vector<std::string>& hosts, const std::string& current,
                 const std::string& master, bool is_master) {
  CHECK(cluster.hosts == hosts);
  CHECK(cluster.current_host == current);
  CHECK(cluster.master_host == master);
  CHECK(cluster.is_master() == is_master);
  CHECK(cluster.network_interface == "eth0");
  CHECK(cluster.single_host() == (hosts.size() == 1));
}

}  // namespace

TEST_CASE("cluster: AWS Batch main node", "[cluster]") {
  auto environment = batch_environment("3", "0", "0");
  REQUIRE(is_batch_multinode(environment));
  auto cluster = cluster_from_batch(environment);
  CHECK(cluster.platform == JobPlatform::aws_batch);
  check_shape(cluster, {"node-0", "node-1", "node-2"}, "node-0", "node-0", true);
  REQUIRE(cluster.batch.has_value());
  CHECK(cluster.batch->num_nodes == 3);
  CHECK(cluster.batch->node_index == 0);
  CHECK(cluster.batch->main_node_index == 0);
  CHECK(cluster.batch->main_node_address.empty());  // Batch does not set it on the main node
  CHECK(cluster.batch->job_id == "0123-4567");         // without the "#N" that names one node
}

TEST_CASE("cluster: AWS Batch child node", "[cluster]") {
  auto environment = batch_environment("3", "2", "0");
  environment["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = "10.0.12.7";
  auto cluster = cluster_from_batch(environment);
  check_shape(cluster, {"node-0", "node-1", "node-2"}, "node-2", "node-0", false);
  CHECK(cluster.batch->node_index == 2);
  CHECK(cluster.batch->main_node_address == "10.0.12.7");
  CHECK(cluster.batch->job_id == "0123-4567");
  environment["AWS_BATCH_JOB_ID"] = "0123-4567";  // a job ID without "#N" is taken whole
  CHECK(cluster_from_batch(environment).batch->job_id == "0123-4567");
}

TEST_CASE("cluster: AWS Batch with a main node that is not index 0", "[cluster]") {
  auto environment = batch_environment("4", "0", "2");
  environment["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = "192.168.1.20";
  auto cluster = cluster_from_batch(environment);
  // The master comes first, the others by index: every node computes the same list.
  check_shape(cluster, {"node-2", "node-0", "node-1", "node-3"}, "node-0", "node-2", false);

  auto main_environment = batch_environment("4", "2", "2");
  check_shape(cluster_from_batch(main_environment), {"node-2", "node-0", "node-1", "node-3"}, "node-2", "node-2",
              true);
}

TEST_CASE("cluster: which environments are AWS Batch multi-node jobs", "[cluster]") {
  CHECK(is_batch_multinode(batch_environment("2", "0", "0")));
  CHECK(is_batch_multinode({{"AWS_BATCH_JOB_NUM_NODES", "2"}}));
  CHECK(is_batch_multinode({{"AWS_BATCH_JOB_NODE_INDEX", "1"}}));
  CHECK_FALSE(is_batch_multinode({}));
  CHECK_FALSE(is_batch_multinode({{"AWS_BATCH_JOB_ID", "single-node-job"}, {"AWS_BATCH_JQ_NAME", "q"}}));
  // An empty value counts as unset.
  CHECK_FALSE(is_batch_multinode({{"AWS_BATCH_JOB_NUM_NODES", ""}, {"AWS_BATCH_JOB_NODE_INDEX", ""}}));
}

TEST_CASE("cluster: local, single-node Batch and single-host SageMaker have one shape", "[cluster]") {
  auto local = cluster_for_local_host("node-0");
  CHECK(local.platform == JobPlatform::local);
  CHECK_FALSE(local.batch.has_value());
  check_shape(local, {"node-0"}, "node-0", "node-0", true);

  auto batch = cluster_from_batch(batch_environment("1", "0", "0"));
  check_shape(batch, {"node-0"}, "node-0", "node-0", true);

  ResourceConfig config;
  config.current_host = "node-0";
  config.hosts = {"node-0"};
  auto sagemaker = cluster_from_sagemaker(config);
  CHECK(sagemaker.platform == JobPlatform::sagemaker);
  check_shape(sagemaker, {"node-0"}, "node-0", "node-0", true);

  for (const auto* other : {&batch, &sagemaker}) {
    CHECK(other->hosts == local.hosts);
    CHECK(other->current_host == local.current_host);
    CHECK(other->master_host == local.master_host);
    CHECK(other->is_master() == local.is_master());
    CHECK(other->network_interface == local.network_interface);
  }
  CHECK(std::string(to_string(JobPlatform::aws_batch)) == "AWS Batch multi-node");
  CHECK(std::string(to_string(JobPlatform::local)) == "local");
  CHECK(std::string(to_string(JobPlatform::sagemaker)) == "SageMaker");
}

TEST_CASE("cluster: the local host has a name", "[cluster]") {
  auto name = local_host_name();
  CHECK_FALSE(name.empty());
  check_shape(cluster_for_local_host(name), {name}, name, name, true);
}

namespace {

struct BadBatchCase {
  std::string label;
  EnvironmentMap environment;
  std::string expected;
};

EnvironmentMap with(EnvironmentMap environment, const std::string& name, const std::string& value) {
  environment[name] = value;
  return environment;
}

EnvironmentMap without(EnvironmentMap environment, const std::string& name) {
  environment.erase(name);
  return environment;
}

std::vector<BadBatchCase> bad_batch_environments() {
  const auto main = batch_environment("3", "0", "0");
  const auto child = batch_environment("3", "1", "0");
  const std::string no_address =
      "environment variable AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS: expected the main node's IPv4 address (AWS "
      "Batch sets it on child nodes), got ";
  const std::string no_job_id =
      "environment variable AWS_BATCH_JOB_ID: expected the job's ID (AWS Batch sets it on every node; the nodes of a "
      "multi-node job register with the main node under it), got ";
  return {
      {"no number of nodes", without(main, "AWS_BATCH_JOB_NUM_NODES"),
       "environment variable AWS_BATCH_JOB_NUM_NODES is not set; AWS Batch sets it on every node of a multi-node "
       "parallel job (the number of nodes)"},
      {"no node index", without(main, "AWS_BATCH_JOB_NODE_INDEX"),
       "environment variable AWS_BATCH_JOB_NODE_INDEX is not set; AWS Batch sets it on every node of a multi-node "
       "parallel job (this node's index)"},
      {"no main node index", without(main, "AWS_BATCH_JOB_MAIN_NODE_INDEX"),
       "environment variable AWS_BATCH_JOB_MAIN_NODE_INDEX is not set; AWS Batch sets it on every node of a "
       "multi-node parallel job (the main node's index)"},
      {"empty node index", with(main, "AWS_BATCH_JOB_NODE_INDEX", ""),
       "environment variable AWS_BATCH_JOB_NODE_INDEX is not set; AWS Batch sets it on every node of a multi-node "
       "parallel job (this node's index)"},
      {"number of nodes a word", with(main, "AWS_BATCH_JOB_NUM_NODES", "three"),
       "environment variable AWS_BATCH_JOB_NUM_NODES: expected an integer from 1 to 10000 (the number of nodes), got "
       "\"three\""},
      {"zero nodes", with(main, "AWS_BATCH_JOB_NUM_NODES", "0"),
       "environment variable AWS_BATCH_JOB_NUM_NODES: expected an integer from 1 to 10000 (the number of nodes), got "
       "\"0\""},
      {"negative nodes", with(main, "AWS_BATCH_JOB_NUM_NODES", "-2"),
       "environment variable AWS_BATCH_JOB_NUM_NODES: expected an integer from 1 to 10000 (the number of nodes), got "
       "\"-2\""},
      {"fractional nodes", with(main, "AWS_BATCH_JOB_NUM_NODES", "2.0"),
       "environment variable AWS_BATCH_JOB_NUM_NODES: expected an integer from 1 to 10000 (the number of nodes), got "
       "\"2.0\""},
      {"nodes with a space", with(main, "AWS_BATCH_JOB_NUM_NODES", " 3"),
       "environment variable AWS_BATCH_JOB_NUM_NODES: expected an integer from 1 to 10000 (the number of nodes), got "
       "\" 3\""},
      {"nodes with a newline", with(main, "AWS_BATCH_JOB_NUM_NODES", "3\n"),
       "environment variable AWS_BATCH_JOB_NUM_NODES: expected an integer from 1 to 10000 (the number of nodes), got "
       "\"3\\n\""},
      {"too many nodes", with(main, "AWS_BATCH_JOB_NUM_NODES", "10001"),
       "environment variable AWS_BATCH_JOB_NUM_NODES: expected an integer from 1 to 10000 (the number of nodes), got "
       "\"10001\""},
      {"a huge number of nodes", with(main, "AWS_BATCH_JOB_NUM_NODES", "99999999999999999999"),
       "environment variable AWS_BATCH_JOB_NUM_NODES: expected an integer from 1 to 10000 (the number of nodes), got "
       "\"99999999999999999999\""},
      {"node index equal to the number of nodes", with(main, "AWS_BATCH_JOB_NODE_INDEX", "3"),
       "environment variable AWS_BATCH_JOB_NODE_INDEX: expected an integer from 0 to 2 (this node's index), got "
       "\"3\""},
      {"node index a word", with(main, "AWS_BATCH_JOB_NODE_INDEX", "first"),
       "environment variable AWS_BATCH_JOB_NODE_INDEX: expected an integer from 0 to 2 (this node's index), got "
       "\"first\""},
      {"main node index beyond the nodes", with(main, "AWS_BATCH_JOB_MAIN_NODE_INDEX", "5"),
       "environment variable AWS_BATCH_JOB_MAIN_NODE_INDEX: expected an integer from 0 to 2 (the main node's index), "
       "got \"5\""},
      {"no job ID", without(main, "AWS_BATCH_JOB_ID"), no_job_id + "nothing"},
      {"a job ID without its main part", with(main, "AWS_BATCH_JOB_ID", "#1"), no_job_id + "\"#1\""},
      {"a job ID with a space", with(main, "AWS_BATCH_JOB_ID", "a b#0"), no_job_id + "\"a b#0\""},
      {"child without the main node's address", child, no_address + "nothing"},
      {"child with an empty address", with(child, "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", ""),
       no_address + "nothing"},
      {"child with a host name", with(child, "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", "main.internal"),
       no_address + "\"main.internal\""},
      {"child with an IPv6 address", with(child, "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", "fe80::1"),
       no_address + "\"fe80::1\""},
      {"child with an address out of range", with(child, "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", "10.0.0.256"),
       no_address + "\"10.0.0.256\""},
      {"child with an address and a port", with(child, "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", "10.0.0.1:22"),
       no_address + "\"10.0.0.1:22\""},
  };
}

}  // namespace

TEST_CASE("cluster: bad AWS Batch variables, each with its exact message", "[cluster][malformed]") {
  const auto cases = bad_batch_environments();
  const auto& row = GENERATE_COPY(from_range(cases));
  INFO("case: " << row.label);
  REQUIRE(config_error_message([&] { cluster_from_batch(row.environment); }) == row.expected);
}
