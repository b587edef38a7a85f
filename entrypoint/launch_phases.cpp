#include "entrypoint/launch_phases.h"

#include "common/log.h"
#include "job/train_start.h"

#include <fmt/format.h>

#include <algorithm>

namespace train {
namespace {

constexpr const char* phase_names[launch_phase_count] = {"sshd", "registration", "sshd_probes", "mpirun_start",
                                                         "ranks_up"};

struct LauncherPhases {
  std::optional<double> origin;
  std::array<std::optional<double>, launch_phase_count> wall_ends{};
  bool logged = false;
};

LauncherPhases& launcher_phases() {
  static LauncherPhases phases;
  return phases;
}

}  // namespace

std::string format_launch_line(const LaunchTimes& times, const std::string& host) {
  std::string line = fmt::format("launcher: ranks up {:.3f} s after train started on {}:", times.ends.back(), host);
  for (size_t phase = 0; phase < launch_phase_count; ++phase) {
    line += fmt::format(" {}={:.3f}", phase_names[phase], times.ends[phase] - (phase == 0 ? 0.0 : times.ends[phase - 1]));
  }
  return line;
}

void note_launch_phase(LaunchPhase phase) {
  LauncherPhases& phases = launcher_phases();
  if (!phases.origin) phases.origin = train_start_of_this_host(current_environment(), false).value_or(wall_clock_seconds());
  auto& end = phases.wall_ends[static_cast<size_t>(phase)];
  if (!end) end = wall_clock_seconds();
}

void log_launch_phases(const std::string& host) {
  LauncherPhases& phases = launcher_phases();
  if (phases.logged || !phases.origin || !phases.wall_ends.back()) return;
  phases.logged = true;
  LaunchTimes times;
  double previous = 0;
  for (size_t i = 0; i < launch_phase_count; ++i) {
    // A phase this host did not go through ends where the one before it did.
    previous = std::max(previous, phases.wall_ends[i] ? *phases.wall_ends[i] - *phases.origin : previous);
    times.ends[i] = previous;
  }
  log_info("{}", format_launch_line(times, host));
}

}  // namespace train
