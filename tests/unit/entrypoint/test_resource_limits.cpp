// The limits a job needs: a soft limit too low is raised to the hard one where that is enough, a hard one too
// low is refused with the numbers and what to do.
#include "entrypoint/resource_limits.h"

#include "job/hyperparameters.h"

#include <catch2/catch.hpp>

using namespace train;
using Catch::Contains;
using Catch::StartsWith;

namespace {

JobDescription job_on(size_t hosts, int ranks_per_host, Workload workload = Workload::train_resnet) {
  JobDescription job;
  for (size_t i = 1; i <= hosts; ++i) job.cluster.hosts.push_back("algo-" + std::to_string(i));
  job.cluster.current_host = job.cluster.master_host = "algo-1";
  job.ranks_per_host = ranks_per_host;
  job.workload = workload;
  job.hyperparameters = parse_hyperparameters({{"num_layers", "18"}}, "hyperparameters.json", workload);
  return job;
}

}  // namespace

TEST_CASE("resource limits: open files grow with the ranks and the hosts, above what mpirun was measured to need",
          "[resource_limits]") {
  // Measured: 36 descriptors for 2 ranks on one host, 44 for 4, 64 for 8.
  CHECK(open_files_need(job_on(1, 2)).least > 36);
  CHECK(open_files_need(job_on(1, 4)).least > 44);
  CHECK(open_files_need(job_on(1, 8)).least > 64);
  CHECK(open_files_need(job_on(16, 8)).least > open_files_need(job_on(1, 8)).least);
  CHECK(open_files_need(job_on(2, 4)).who == "mpirun and 4 ranks on each of 2 hosts");
}

TEST_CASE("resource limits: the file size is checked for train's own training only", "[resource_limits]") {
  CHECK_FALSE(file_size_need(job_on(1, 2, Workload::user_command), 1000));
  auto worker = job_on(2, 2);
  worker.cluster.current_host = "algo-2";
  CHECK_FALSE(file_size_need(worker, 1000));  // only the master's rank 0 writes the checkpoint
  const auto need = file_size_need(job_on(1, 2), 89'467'072);
  REQUIRE(need);
  CHECK(need->resource == RLIMIT_FSIZE);
  CHECK(need->least == 89'467'072);
  CHECK(need->who == "the checkpoint of ResNet-18");
}

TEST_CASE("resource limits: raise the soft limit to the hard one, or refuse", "[resource_limits]") {
  const LimitNeed files{RLIMIT_NOFILE, 88, "mpirun and 2 ranks on each of 1 host"};
  SECTION("enough already: nothing to do") {
    const auto decision = decide_limit(files, 1024, 4096);
    CHECK_FALSE(decision.raise_soft_to);
    CHECK_FALSE(decision.refusal);
  }
  SECTION("a low soft limit under a high hard one is raised to the hard one") {
    const auto decision = decide_limit(files, 24, 1048576);
    CHECK(decision.raise_soft_to == rlim_t{1048576});
    CHECK_FALSE(decision.refusal);
  }
  SECTION("a hard limit too low is refused with the numbers and what to do") {
    const auto decision = decide_limit(files, 24, 24);
    REQUIRE(decision.refusal);
    CHECK(*decision.refusal ==
          "The job cannot run with this process's limit on open files (RLIMIT_NOFILE, `ulimit -n`): 24 (soft) and 24 "
          "(hard), where mpirun and 2 ranks on each of 1 host need at least 88 descriptors. Start train with a higher "
          "limit: `ulimit -n 88` (as root) before it, or `docker run --ulimit nofile=1048576`.");
  }
  SECTION("a file size: unlimited is enough; bytes in the message") {
    const LimitNeed size{RLIMIT_FSIZE, 89'467'072, "the checkpoint of ResNet-18"};
    CHECK_FALSE(decide_limit(size, RLIM_INFINITY, RLIM_INFINITY).refusal);
    CHECK(decide_limit(size, 1000, RLIM_INFINITY).raise_soft_to == rlim_t{RLIM_INFINITY});
    const auto decision = decide_limit(size, 1'000'000, 1'000'000);
    REQUIRE(decision.refusal);
    CHECK_THAT(*decision.refusal, StartsWith("The job cannot run with this process's limit on a file's size "
                                             "(RLIMIT_FSIZE, `ulimit -f`): 1000000 bytes"));
    CHECK_THAT(*decision.refusal, Contains("where the checkpoint of ResNet-18 needs at least 89467072 bytes"));
    CHECK_THAT(*decision.refusal, Contains("`ulimit -f unlimited`"));
  }
}
