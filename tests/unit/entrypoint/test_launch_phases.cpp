#include "entrypoint/launch_phases.h"

#include <catch2/catch.hpp>

using namespace train;

TEST_CASE("launch phases: the launcher's line names each phase, and they add up to the ranks' start",
          "[launch_phases]") {
  LaunchTimes times;
  times.ends = {0.25, 0.25, 0.5, 0.75, 2.0};
  CHECK(format_launch_line(times, "algo-1") ==
        "launcher: ranks up 2.000 s after train started on algo-1: sshd=0.250 registration=0.000 sshd_probes=0.250 "
        "mpirun_start=0.250 ranks_up=1.250");
}
