// A rank's peak memory seen from outside, as the launcher watches it (entrypoint/rank_memory.h).
#include "entrypoint/rank_memory.h"

#include "entrypoint/child_process.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

using namespace train;

TEST_CASE("rank memory: the peak of a process carrying a rank's number is seen from its ancestor", "[launch]") {
  EnvironmentMap environment = current_environment();
  environment["OMPI_COMM_WORLD_RANK"] = "3";
  SpawnOptions options;
  options.capture_output = false;
  // A child (below a shell, as a rank below rank-exec) that touches 64 MiB and waits.
  ChildProcess child = spawn_child({"sh", "-c", "python3 -c 'b = bytearray(64 << 20); import time; time.sleep(30)'"},
                                   environment, options);
  RankMemoryWatch watch;
  for (int i = 0; i < 200 && !(watch.peak(3) && *watch.peak(3) >= (64ull << 20)); ++i) {
    watch.sample_if_due(::getpid());
    ::usleep(50000);
  }
  CHECK(watch.peak(3).value_or(0) >= (64ull << 20));
  CHECK_FALSE(watch.peak(2));
  ::kill(-child.pid, SIGKILL);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
}

TEST_CASE("rank memory: a process seen before it became a rank (mpirun's fork before its exec) is seen later",
          "[launch]") {
  SpawnOptions options;
  options.capture_output = false;
  // The shell carries no rank number while it sleeps; the same process, after exec, does.
  ChildProcess child = spawn_child({"sh", "-c", "sleep 1; exec env OMPI_COMM_WORLD_RANK=5 python3 -c "
                                                "'b = bytearray(64 << 20); import time; time.sleep(30)'"},
                                   current_environment(), options);
  RankMemoryWatch watch;
  watch.sample_if_due(::getpid());
  CHECK_FALSE(watch.peak(5));
  for (int i = 0; i < 200 && !(watch.peak(5) && *watch.peak(5) >= (64ull << 20)); ++i) {
    ::usleep(50000);
    watch.sample_if_due(::getpid());
  }
  CHECK(watch.peak(5).value_or(0) >= (64ull << 20));
  ::kill(-child.pid, SIGKILL);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
}
