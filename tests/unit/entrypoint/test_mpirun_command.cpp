// The mpirun command line: slots, hosts, tagged output, no tree spawn, the environment by name, the
// user's options last before the rank program.
#include "entrypoint/mpirun_command.h"
#include "job/hyperparameters.h"
#include "job/job_description.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

using namespace train;

namespace {

JobDescription job_on(std::vector<std::string> hosts, const std::string& current, int ranks_per_host,
                      const std::string& custom_mpi_options = "") {
  JobDescription job;
  job.cluster.platform = JobPlatform::sagemaker;
  job.cluster.hosts = std::move(hosts);
  job.cluster.current_host = current;
  job.cluster.master_host = job.cluster.hosts.front();
  job.cluster.network_interface = "eth1";
  job.ranks_per_host = ranks_per_host;
  nlohmann::json document = nlohmann::json::object();
  if (!custom_mpi_options.empty()) document["custom_mpi_options"] = custom_mpi_options;
  job.hyperparameters = parse_hyperparameters(document, "hyperparameters.json");
  return job;
}

using Words = std::vector<std::string>;

// Index of the first occurrence of the consecutive words `needle`, if any.
std::optional<size_t> find_words(const Words& haystack, const Words& needle) {
  auto at = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end());
  if (at == haystack.end()) return std::nullopt;
  return static_cast<size_t>(at - haystack.begin());
}

// The names given to -x.
Words exported_names(const Words& command) {
  Words names;
  for (size_t i = 0; i + 1 < command.size(); ++i) {
    if (command[i] == "-x") names.push_back(command[i + 1]);
  }
  return names;
}

bool contains(const Words& words, const std::string& word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

const Words rank_program = {"/usr/local/bin/train", "rank"};

const EnvironmentMap environment = {
    {"PATH", "/usr/local/bin:/usr/bin"},
    {"LD_LIBRARY_PATH", "/opt/lib"},
    {"MY_SETTING", "secret value"},
    {"SAGEMAKER_BASE_DIR", "/tmp/ml"},
    {"SM_HOSTS", "[\"algo-1\"]"},
    {"SM_CURRENT_HOST", "algo-1"},
    {"SM_NUM_CPUS", "2"},
    {"OMPI_COMM_WORLD_RANK", "0"},
    {"OMPI_MCA_plm_rsh_agent", "ssh"},
    {"PMIX_RANK", "0"},
    {"ORTE_SOMETHING", "1"},
    {"OPAL_PREFIX", "/usr"},
    {"PRTE_MCA_x", "1"},
    {"HOSTNAME", "vm"},
    {"PWD", "/work"},
    {"BASH_FUNC_f%%", "() { :; }"},
    {"1NUMBER", "x"},
};

}  // namespace

TEST_CASE("mpirun command: one host, N ranks on localhost, tagged output, no tree spawn", "[mpirun]") {
  JobDescription job = job_on({"algo-1"}, "algo-1", 4);
  Words command = build_mpirun_command(job, rank_program, environment, "/usr/bin/mpirun");
  CAPTURE(command);
  REQUIRE(command.front() == "/usr/bin/mpirun");
  CHECK(find_words(command, {"-np", "4"}));
  CHECK(find_words(command, {"--host", "localhost:4"}));
  CHECK(contains(command, "--tag-output"));
  CHECK(contains(command, "--allow-run-as-root"));
  CHECK(find_words(command, {"--mca", "plm_rsh_no_tree_spawn", "1"}));
  // One host: no interface restriction (ranks talk over shared memory and loopback).
  CHECK_FALSE(contains(command, "btl_tcp_if_include"));
  // mpirun's default SIGTERM-to-SIGKILL wait: a longer one stalls mpirun that long after every failure.
  CHECK_FALSE(contains(command, "odls_base_sigkill_timeout"));
  // The rank program comes last, whole.
  REQUIRE(command.size() > rank_program.size());
  CHECK(Words(command.end() - static_cast<long>(rank_program.size()), command.end()) == rank_program);
}

TEST_CASE("mpirun command: rank count follows ranks_per_host and the host count", "[mpirun]") {
  for (int per_host : {1, 2, 8}) {
    Words command = build_mpirun_command(job_on({"algo-1"}, "algo-1", per_host), rank_program, {}, "mpirun");
    CAPTURE(per_host, command);
    CHECK(find_words(command, {"-np", std::to_string(per_host)}));
    CHECK(find_words(command, {"--host", "localhost:" + std::to_string(per_host)}));
  }
  Words command = build_mpirun_command(job_on({"algo-1", "algo-10", "algo-2"}, "algo-1", 8), rank_program, {});
  CAPTURE(command);
  CHECK(command.front() == "mpirun");
  CHECK(find_words(command, {"-np", "24"}));
  CHECK(find_words(command, {"--host", "algo-1:8,algo-10:8,algo-2:8"}));
  CHECK(find_words(command, {"--mca", "plm_rsh_no_tree_spawn", "1"}));
  CHECK(find_words(command, {"--mca", "btl_tcp_if_include", "eth1"}));
  CHECK(find_words(command, {"--mca", "oob_tcp_if_include", "eth1"}));
  CHECK(find_words(command, {"-x", "NCCL_SOCKET_IFNAME=eth1"}));
}

TEST_CASE("mpirun command: the environment is exported by name, without SM_*, OMPI_* and per-host state",
          "[mpirun]") {
  Words command = build_mpirun_command(job_on({"algo-1"}, "algo-1", 2), rank_program, environment);
  CAPTURE(command);
  Words names = exported_names(command);
  for (const char* name : {"PATH", "LD_LIBRARY_PATH", "MY_SETTING", "SAGEMAKER_BASE_DIR"}) {
    CHECK(contains(names, name));
  }
  for (const char* name : {"SM_HOSTS", "SM_CURRENT_HOST", "SM_NUM_CPUS", "OMPI_COMM_WORLD_RANK",
                           "OMPI_MCA_plm_rsh_agent", "PMIX_RANK", "ORTE_SOMETHING", "OPAL_PREFIX", "PRTE_MCA_x",
                           "HOSTNAME", "PWD", "BASH_FUNC_f%%", "1NUMBER"}) {
    CHECK_FALSE(contains(names, name));
  }
  // Values never appear on the command line (ps shows it to everyone on the host).
  for (const auto& word : command) CHECK(word.find("secret value") == std::string::npos);
  // Every -x comes before the program.
  for (size_t i = 0; i < command.size(); ++i) {
    if (command[i] == "-x") CHECK(i + 1 < command.size() - rank_program.size());
  }
}

TEST_CASE("mpirun command: custom_mpi_options come after ours, right before the program", "[mpirun]") {
  JobDescription job = job_on({"algo-1"}, "algo-1", 4, "--mca btl_tcp_if_exclude lo,docker0 -x 'NAME=two words'");
  Words command = build_mpirun_command(job, rank_program, environment);
  CAPTURE(command);
  const Words custom = {"--mca", "btl_tcp_if_exclude", "lo,docker0", "-x", "NAME=two words"};
  auto at = find_words(command, custom);
  REQUIRE(at);
  CHECK(*at + custom.size() + rank_program.size() == command.size());
  // Everything of ours is before them.
  for (const Words& ours : {Words{"-np", "4"}, Words{"--tag-output"}, Words{"--mca", "plm_rsh_no_tree_spawn", "1"},
                            Words{"-x", "PATH"}}) {
    auto ours_at = find_words(command, ours);
    REQUIRE(ours_at);
    CHECK(*ours_at < *at);
  }
}

TEST_CASE("mpirun command: which host runs a rank", "[mpirun]") {
  JobDescription single = job_on({"algo-1"}, "algo-1", 4);
  CHECK(host_of_rank(single, 0) == "algo-1");
  CHECK(host_of_rank(single, 3) == "algo-1");
  CHECK(host_of_rank(single, -1) == "?");
  JobDescription multi = job_on({"algo-1", "algo-2"}, "algo-2", 4);
  CHECK(host_of_rank(multi, 0) == "algo-1");
  CHECK(host_of_rank(multi, 3) == "algo-1");
  CHECK(host_of_rank(multi, 4) == "algo-2");
  CHECK(host_of_rank(multi, 7) == "algo-2");
  CHECK(host_of_rank(multi, 8) == "?");
}

TEST_CASE("mpirun command: which variables are host-specific", "[mpirun]") {
  for (const char* name : {"SM_HOSTS", "SM_CHANNEL_TRAIN", "OMPI_COMM_WORLD_SIZE", "PMIX_NAMESPACE", "ORTE_X",
                           "OPAL_PREFIX", "PRTE_X", "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_"}) {
    CHECK(is_host_specific_variable(name));
  }
  for (const char* name : {"PATH", "HOME", "LD_LIBRARY_PATH", "NCCL_DEBUG", "SAGEMAKER_BASE_DIR", "SMALL",
                           "MY_SM_VAR", "TRAIN_STOP_GRACE_SECONDS"}) {
    CHECK_FALSE(is_host_specific_variable(name));
  }
}

TEST_CASE("mpirun command: intra-host copies need no ptrace rights (Docker's default container)", "[mpirun]") {
  Words command = build_mpirun_command(job_on({"algo-1"}, "algo-1", 2), rank_program, environment);
  CAPTURE(command);
  CHECK(find_words(command, {"--mca", "btl_vader_single_copy_mechanism", "none"}));
  // The user's choice wins, in the options or in Open MPI's environment variable (never both given to mpirun,
  // which would join the two values with a comma).
  Words chosen = build_mpirun_command(
      job_on({"algo-1"}, "algo-1", 2, "--mca btl_vader_single_copy_mechanism cma"), rank_program, environment);
  CHECK(std::count(chosen.begin(), chosen.end(), "btl_vader_single_copy_mechanism") == 1);
  CHECK(find_words(chosen, {"--mca", "btl_vader_single_copy_mechanism", "cma"}));
  EnvironmentMap with_variable = environment;
  with_variable["OMPI_MCA_btl_vader_single_copy_mechanism"] = "cma";
  Words from_environment = build_mpirun_command(job_on({"algo-1"}, "algo-1", 2), rank_program, with_variable);
  CHECK_FALSE(contains(from_environment, "btl_vader_single_copy_mechanism"));
}

TEST_CASE("mpirun command: MPI through ob1 as the toolkit sets it, unless the user picks a pml or an mtl",
          "[mpirun]") {
  const auto command = build_mpirun_command(job_on({"algo-1", "algo-2"}, "algo-1", 2), rank_program, environment);
  CHECK(find_words(command, {"--mca", "pml", "ob1"}));
  const auto options = build_mpirun_command(job_on({"algo-1"}, "algo-1", 2, "--mca pml cm --mca mtl ofi"),
                                            rank_program, environment);
  CHECK(std::count(options.begin(), options.end(), "pml") == 1);
  CHECK(find_words(options, {"--mca", "pml", "cm"}));
  const auto mtl_only = build_mpirun_command(job_on({"algo-1"}, "algo-1", 2, "--mca mtl psm2"), rank_program,
                                             environment);
  CHECK_FALSE(contains(mtl_only, "pml"));
  for (const char* variable : {"OMPI_MCA_pml", "OMPI_MCA_mtl"}) {
    EnvironmentMap with_variable = environment;
    with_variable[variable] = "cm";
    CHECK_FALSE(contains(build_mpirun_command(job_on({"algo-1"}, "algo-1", 2), rank_program, with_variable), "pml"));
  }
}

TEST_CASE("mpirun command: NCCL_DEBUG as the toolkit sets it", "[mpirun]") {
  auto nccl_debug_values = [](const Words& command) {
    Words values;
    for (size_t i = 0; i + 1 < command.size(); ++i) {
      if (command[i] == "-x" && command[i + 1].rfind("NCCL_DEBUG", 0) == 0) values.push_back(command[i + 1]);
    }
    return values;
  };
  // INFO by default (NCCL then says which network it uses), the launcher's own value, or the options'.
  CHECK(nccl_debug_values(build_mpirun_command(job_on({"algo-1"}, "algo-1", 2), rank_program, environment)) ==
        Words{"NCCL_DEBUG=INFO"});
  EnvironmentMap with_variable = environment;
  with_variable["NCCL_DEBUG"] = "WARN";
  CHECK(nccl_debug_values(build_mpirun_command(job_on({"algo-1"}, "algo-1", 2), rank_program, with_variable)) ==
        Words{"NCCL_DEBUG=WARN"});
  Words command = build_mpirun_command(job_on({"algo-1"}, "algo-1", 2, "--NCCL_DEBUG TRACE -x FOO=1"), rank_program,
                                       with_variable);
  CAPTURE(command);
  CHECK(nccl_debug_values(command) == Words{"NCCL_DEBUG=TRACE"});
  // Passed raw, --NCCL_DEBUG would stop mpirun ("unrecognized option"); the rest goes on in order.
  CHECK_FALSE(contains(command, "--NCCL_DEBUG"));
  CHECK(find_words(command, {"-x", "FOO=1", "/usr/local/bin/train", "rank"}));
}
