// One launcher per job directory: a second one is refused at once, naming the first, and touches nothing.
#include "entrypoint/job_lock.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>

using namespace train;
using train::testing::TempJobDir;

TEST_CASE("job lock: a second launcher on one job directory is refused, naming the first", "[job_lock]") {
  TempJobDir dir;
  auto first = lock_job_directory(dir.paths(), 4242, "algo-1");
  REQUIRE(first.lock.held());
  CHECK_FALSE(first.refused);
  CHECK_FALSE(first.warning);

  auto second = lock_job_directory(dir.paths(), 4343, "algo-1");
  CHECK_FALSE(second.lock.held());
  REQUIRE(second.refused);
  CHECK_THAT(*second.refused, Catch::StartsWith("the job directory " + dir.root().string() +
                                                " is in use by another train (pid 4242 on host algo-1, since 20"));
  CHECK_THAT(*second.refused, Catch::Contains("nothing was written"));
  // Another job directory is another lock (each simulated host has its own).
  TempJobDir other;
  CHECK(lock_job_directory(other.paths(), 4343, "algo-2").lock.held());

  // Released with its holder: the next launcher takes it and names itself.
  first.lock = JobLock();
  auto third = lock_job_directory(dir.paths(), 4444, "algo-1");
  REQUIRE(third.lock.held());
  CHECK_THAT(*lock_job_directory(dir.paths(), 1, "x").refused, Catch::Contains("(pid 4444 on host algo-1, since"));
}

TEST_CASE("job lock: a read-only output/ still locks an existing lock file, and never follows a link", "[job_lock]") {
  TempJobDir dir;
  { auto made = lock_job_directory(dir.paths(), 1, "algo-1"); }  // leaves the file
  REQUIRE(::chmod(dir.paths().output().c_str(), 0555) == 0);
  REQUIRE(::chmod((dir.paths().output() / ".train.lock").c_str(), 0444) == 0);
  // Root may write anyway; what matters is that the lock is held either way and a second one refused.
  auto first = lock_job_directory(dir.paths(), 2, "algo-1");
  CHECK(first.lock.held());
  CHECK(lock_job_directory(dir.paths(), 3, "algo-1").refused);
  ::chmod(dir.paths().output().c_str(), 0755);

  TempJobDir linked;
  std::filesystem::create_directories(linked.paths().output());
  const auto target = linked.root() / "elsewhere";
  std::filesystem::create_symlink(target, linked.paths().output() / ".train.lock");
  auto outcome = lock_job_directory(linked.paths(), 5, "algo-1");
  CHECK_FALSE(outcome.lock.held());
  REQUIRE(outcome.warning);
  CHECK_THAT(*outcome.warning, Catch::Contains("cannot lock the job directory"));
  CHECK_FALSE(std::filesystem::exists(target));

  // A FIFO in the file's place does not hold the launcher in open().
  TempJobDir fifo;
  std::filesystem::create_directories(fifo.paths().output());
  REQUIRE(::mkfifo((fifo.paths().output() / ".train.lock").c_str(), 0600) == 0);
  auto with_fifo = lock_job_directory(fifo.paths(), 6, "algo-1");
  CHECK_FALSE(with_fifo.lock.held());
  REQUIRE(with_fifo.warning);
  CHECK_THAT(*with_fifo.warning, Catch::Contains("(it is a FIFO (named pipe))"));
}
