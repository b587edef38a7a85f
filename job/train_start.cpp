#include "job/train_start.h"

#include "common/atomic_file.h"
#include "common/config_error.h"
#include "common/json_file.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

namespace train {
namespace {

std::optional<double> parse_seconds(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  while (end && (*end == '\n' || *end == ' ')) ++end;
  if (end == text.c_str() || (end && *end != '\0') || !(value > 0)) return std::nullopt;
  return value;
}

std::string seconds_text(double seconds) { return fmt::format("{:.6f}", seconds); }

}  // namespace

double wall_clock_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double note_train_start() {
  const double now = wall_clock_seconds();
  ::setenv(train_started_variable, seconds_text(now).c_str(), 1);
  return now;
}

void leave_train_start_for_ranks(double started, const std::filesystem::path& file) {
  try {
    write_file_atomically(file.string(), seconds_text(started) + "\n");
  } catch (const std::exception&) {
    // Best effort: the ranks of this host then count from the master's start.
  }
}

std::optional<double> train_start_of_this_host(const EnvironmentMap& environment, bool on_worker_host,
                                               const std::filesystem::path& file) {
  if (on_worker_host) {
    try {
      // A regular file of a few bytes only: anything else in its place (a FIFO) must not hang the rank.
      if (auto seconds = parse_seconds(read_small_file(file, 64))) return seconds;
    } catch (const ConfigError&) {
      // Missing or not a file: the master's start stands in.
    }
  }
  return parse_seconds(lookup(environment, train_started_variable).value_or(""));
}

}  // namespace train
