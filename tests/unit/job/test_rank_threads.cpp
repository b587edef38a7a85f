// How many threads a rank runs: the user's OMP_NUM_THREADS as OpenMP reads it, else its share of the host's
// cores; and what a rank's program is given.
#include "job/job_description.h"
#include "job/rank_environment.h"

#include <catch2/catch.hpp>

using namespace train;

namespace {

JobDescription host_with_cpus(int cpus) {
  JobDescription job;
  job.resources.cpus = cpus;
  return job;
}

const RankIdentity two_on_the_host{.rank = 1, .size = 4, .local_rank = 1, .local_size = 2};

}  // namespace

TEST_CASE("rank threads: the host's cores shared among its ranks, at least one", "[rank_environment]") {
  CHECK(threads_per_rank(host_with_cpus(8), two_on_the_host, {}) == 4);
  CHECK(threads_per_rank(host_with_cpus(9), two_on_the_host, {}) == 4);
  CHECK(threads_per_rank(host_with_cpus(1), two_on_the_host, {}) == 1);
  CHECK(threads_per_rank(host_with_cpus(8), RankIdentity{}, {}) == 8);
}

TEST_CASE("rank threads: OMP_NUM_THREADS as OpenMP reads it wins", "[rank_environment]") {
  const JobDescription job = host_with_cpus(8);
  CHECK(threads_per_rank(job, two_on_the_host, {{"OMP_NUM_THREADS", "3"}}) == 3);
  CHECK(threads_per_rank(job, two_on_the_host, {{"OMP_NUM_THREADS", "16"}}) == 16);  // more than the cores: asked for
  CHECK(threads_per_rank(job, two_on_the_host, {{"OMP_NUM_THREADS", " 2 "}}) == 2);
  CHECK(threads_per_rank(job, two_on_the_host, {{"OMP_NUM_THREADS", "6,2"}}) == 6);  // the outermost level's
}

TEST_CASE("rank threads: an OMP_NUM_THREADS OpenMP would ignore leaves the share", "[rank_environment]") {
  const JobDescription job = host_with_cpus(8);
  for (const char* ignored : {"", "0", "-2", "two", "2.5", ",4"}) {
    INFO("OMP_NUM_THREADS=" << ignored);
    CHECK(threads_per_rank(job, two_on_the_host, {{"OMP_NUM_THREADS", ignored}}) == 4);
  }
}

TEST_CASE("rank threads: a rank's program gets OMP_NUM_THREADS unless it is set", "[rank_environment]") {
  const JobDescription job = host_with_cpus(8);
  CHECK(rank_program_environment(job, {}, two_on_the_host).at("OMP_NUM_THREADS") == "4");
  CHECK(rank_program_environment(job, {{"OMP_NUM_THREADS", "1"}}, two_on_the_host).at("OMP_NUM_THREADS") == "1");
}

TEST_CASE("rank threads: the share of the cores ignores OMP_NUM_THREADS (the data loader's threads)", "[rank_environment]") {
  // torchrun's habit of OMP_NUM_THREADS=1 sets OpenMP's count, never the JPEG decoders' of a GPU rank.
  CHECK(cores_per_rank(host_with_cpus(8), two_on_the_host) == 4);
  CHECK(threads_per_rank(host_with_cpus(8), two_on_the_host, {{"OMP_NUM_THREADS", "1"}}) == 1);
}
