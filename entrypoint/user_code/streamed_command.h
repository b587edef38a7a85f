// Running a helper command of the launcher (pip, the code fetcher) to its end, bounded: its output read line by
// line as it comes, in a process group of its own that is ended as a whole when its time runs out or the job
// is stopped (SIGTERM, then SIGKILL 5 s later), and always reaped.
#pragma once

#include "common/environment_map.h"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train::user_code {

struct StreamedCommand {
  std::vector<std::string> argv;  // argv[0] searched in PATH
  EnvironmentMap environment;
  std::string working_directory;  // empty: ours
  std::chrono::seconds timeout{1};
  // Polled while it runs: a stop signal that has reached the launcher, if any.
  std::function<std::optional<int>()> stop_signal;
  // Each whole line of its stdout (error false) or stderr (error true), without the newline.
  std::function<void(bool error, std::string_view line)> on_line;
};

struct StreamedOutcome {
  int wait_status = 0;              // as waitpid gives it
  bool timed_out = false;           // ended because `timeout` ran out
  std::optional<int> stopped_by;    // ended because of this stop signal
};

// Runs it to its end. Throws SpawnError (entrypoint/child_process.h) when it cannot be started.
StreamedOutcome run_streamed(const StreamedCommand& command);

}  // namespace train::user_code
