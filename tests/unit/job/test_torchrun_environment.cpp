// torchrun's environment for a user's ranks: each rank's place among hosts and ranks, the one master port.
#include "job/torchrun_environment.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <string>

using namespace train;

namespace {

JobDescription two_host_job() {
  JobDescription job;
  job.cluster.hosts = {"algo-1", "algo-2"};
  job.cluster.master_host = "algo-1";
  job.cluster.current_host = "algo-2";
  job.ranks_per_host = 2;
  return job;
}

}  // namespace

TEST_CASE("torchrun's variables place a rank among hosts and ranks", "[torchrun]") {
  const EnvironmentMap environment = {{master_port_variable, "41234"}};
  auto variables = torchrun_variables(two_host_job(), RankIdentity{3, 4, 1, 2}, environment);
  CHECK(variables["RANK"] == "3");
  CHECK(variables["WORLD_SIZE"] == "4");
  CHECK(variables["LOCAL_RANK"] == "1");
  CHECK(variables["LOCAL_WORLD_SIZE"] == "2");
  CHECK(variables["GROUP_RANK"] == "1");
  CHECK(variables["GROUP_WORLD_SIZE"] == "2");
  CHECK(variables["ROLE_RANK"] == "3");
  CHECK(variables["ROLE_WORLD_SIZE"] == "4");
  CHECK(variables["ROLE_NAME"] == "default");
  CHECK(variables["MASTER_ADDR"] == "algo-1");
  CHECK(variables["MASTER_PORT"] == "41234");
  CHECK(variables["TORCHELASTIC_USE_AGENT_STORE"] == "False");
  CHECK(variables["NCCL_ASYNC_ERROR_HANDLING"] == "1");
}

TEST_CASE("torchrun's variables keep a NCCL error handling the job set, and one host's master is localhost",
          "[torchrun]") {
  JobDescription job = two_host_job();
  job.cluster.hosts = {"algo-1"};
  auto variables = torchrun_variables(job, RankIdentity{0, 2, 0, 2}, {{"NCCL_ASYNC_ERROR_HANDLING", "0"}});
  CHECK(variables["NCCL_ASYNC_ERROR_HANDLING"] == "0");
  CHECK(variables["MASTER_ADDR"] == "localhost");
  CHECK(variables["GROUP_WORLD_SIZE"] == "1");
  CHECK(variables["MASTER_PORT"] == std::to_string(torchrun_default_port));
}

TEST_CASE("the master port is the launcher's MASTER_PORT, else a free one", "[torchrun]") {
  CHECK(choose_master_port({{"MASTER_PORT", "7777"}}) == 7777);
  const int port = choose_master_port({});
  CHECK(port > 0);
  CHECK(port <= 65535);
  const std::string message =
      train::testing::config_error_message([] { choose_master_port({{"MASTER_PORT", "99999"}}); });
  CHECK(message.find("MASTER_PORT") != std::string::npos);
  CHECK(message.find("99999") != std::string::npos);
}
