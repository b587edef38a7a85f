#include "runtime/startup_phases.h"

#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

using namespace train;

namespace {

StartupTimes times_with_ends(std::array<double, startup_phase_count> ends) {
  StartupTimes times;
  times.ends = ends;
  return times;
}

// The seconds after `name=` in `line`.
double value_of(const std::string& line, const std::string& name) {
  std::smatch match;
  REQUIRE(std::regex_search(line, match, std::regex(" " + name + "=([0-9.]+)")));
  return std::stod(match[1]);
}

}  // namespace

TEST_CASE("startup phases: the line names every phase of the slowest rank, and they add up to its total",
          "[startup_phases]") {
  const std::vector<StartupTimes> times = {
      times_with_ends({1.0, 1.25, 1.5, 2.0, 2.75, 2.75, 3.0, 3.5}),
      times_with_ends({1.5, 1.75, 2.0, 2.5, 3.25, 3.5, 3.75, 4.25}),  // the slowest
      times_with_ends({1.0, 1.25, 1.5, 2.0, 2.75, 3.0, 3.25, 4.0}),
  };
  const std::string line = format_startup_line(times, {"algo-1", "algo-1", "algo-2"}, true);
  CHECK(line.rfind("startup: first step 4.250 s after train started on its host (slowest: rank 1 on algo-1):", 0) == 0);
  double sum = 0;
  for (size_t phase = 0; phase < startup_phase_count; ++phase) {
    sum += value_of(line, startup_phase_name(static_cast<StartupPhase>(phase)));
  }
  CHECK(sum == Approx(4.25).margin(0.0005 * startup_phase_count));
  CHECK(value_of(line, "launch") == Approx(1.5));
  CHECK(value_of(line, "communicator") == Approx(0.25));
  CHECK(value_of(line, "first_step") == Approx(0.5));
  // Each host's slowest rank.
  CHECK(line.find("; by host: algo-1=4.250 algo-2=4.000") != std::string::npos);
}

TEST_CASE("startup phases: a rank without train's start says it counts from its own", "[startup_phases]") {
  const std::string line = format_startup_line({times_with_ends({0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7})}, {"h"}, false);
  CHECK(line.find("after train started (this rank's start)") != std::string::npos);
}

TEST_CASE("startup phases: a phase never noted takes no time, and none ends before the one before it",
          "[startup_phases]") {
  StartupPhases phases;
  phases.set_origin(std::nullopt);
  phases.done(StartupPhase::launch);
  phases.done(StartupPhase::mpi_init);
  phases.done(StartupPhase::data_index);  // job_checks never noted
  phases.done(StartupPhase::first_step);
  const StartupTimes times = phases.times();
  CHECK_FALSE(phases.counted_from_train_start());
  CHECK(times.duration(static_cast<size_t>(StartupPhase::job_checks)) == 0);
  CHECK(times.duration(static_cast<size_t>(StartupPhase::model)) == 0);
  double sum = 0;
  for (size_t phase = 0; phase < startup_phase_count; ++phase) {
    CHECK(times.duration(phase) >= 0);
    sum += times.duration(phase);
  }
  CHECK(sum == Approx(times.total()));
  const auto spans = phases.monotonic_spans();
  REQUIRE(spans.size() == startup_phase_count);
  for (size_t phase = 1; phase < startup_phase_count; ++phase) CHECK(spans[phase].first == spans[phase - 1].second);
}

TEST_CASE("startup phases: an origin after this process's start (a clock stepped) is not used", "[startup_phases]") {
  StartupPhases phases;
  phases.set_origin(4102444800.0);  // 2100
  CHECK_FALSE(phases.counted_from_train_start());
  phases.set_origin(1.0);
  CHECK(phases.counted_from_train_start());
}
