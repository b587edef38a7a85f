#include "runtime/startup_phases.h"

#include "common/log.h"
#include "common/monotonic_clock.h"
#include "job/train_start.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/comm/gather_text.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/timeline/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <sstream>

namespace train {

namespace {

constexpr const char* phase_names[startup_phase_count] = {"launch",       "mpi_init",    "job_checks", "data_index",
                                                          "model",        "communicator", "first_batch", "first_step"};

// One rank's times as text for the gather: the ends, separated by spaces.
std::string encode(const StartupTimes& times) {
  return fmt::format("{:.6f}", fmt::join(times.ends, " "));
}

StartupTimes decode(const std::string& text) {
  StartupTimes times;
  std::istringstream in(text);
  for (double& end : times.ends) in >> end;
  return times;
}

}  // namespace

const char* startup_phase_name(StartupPhase phase) { return phase_names[static_cast<size_t>(phase)]; }

StartupPhases::StartupPhases() : process_start_(wall_clock_seconds()), process_start_ns_(monotonic_ns()) {}

void StartupPhases::done(StartupPhase phase) {
  auto& end = wall_ends_[static_cast<size_t>(phase)];
  if (!end) end = wall_clock_seconds();
}

StartupTimes StartupPhases::times() const {
  const double origin = counted_from_train_start() ? *origin_ : process_start_;
  StartupTimes times;
  double previous = 0;
  for (size_t i = 0; i < startup_phase_count; ++i) {
    // Never before the phase before it: one left out, or a wall clock stepped back a little.
    previous = std::max(previous, wall_ends_[i] ? *wall_ends_[i] - origin : previous);
    times.ends[i] = previous;
  }
  return times;
}

std::vector<std::pair<int64_t, int64_t>> StartupPhases::monotonic_spans() const {
  const StartupTimes relative = times();
  const double origin = counted_from_train_start() ? *origin_ : process_start_;
  auto monotonic = [&](double since_origin) {
    return process_start_ns_ + static_cast<int64_t>((origin + since_origin - process_start_) * 1e9);
  };
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (size_t i = 0; i < startup_phase_count; ++i) {
    spans.emplace_back(monotonic(i == 0 ? 0.0 : relative.ends[i - 1]), monotonic(relative.ends[i]));
  }
  return spans;
}

StartupPhases& rank_startup_phases() {
  static StartupPhases phases;
  return phases;
}

std::string format_startup_line(const std::vector<StartupTimes>& times, const std::vector<std::string>& hosts,
                                bool from_train_start) {
  if (times.empty()) return "startup: no ranks";
  auto host_of = [&](size_t rank) { return rank < hosts.size() ? hosts[rank] : std::string("?"); };
  size_t slowest = 0;
  for (size_t rank = 1; rank < times.size(); ++rank) {
    if (times[rank].total() > times[slowest].total()) slowest = rank;
  }
  std::string line = fmt::format("startup: first step {:.3f} s after train started {} (slowest: rank {} on {}):",
                                 times[slowest].total(), from_train_start ? "on its host" : "(this rank's start)",
                                 slowest, host_of(slowest));
  for (size_t phase = 0; phase < startup_phase_count; ++phase) {
    line += fmt::format(" {}={:.3f}", phase_names[phase], times[slowest].duration(phase));
  }
  std::map<std::string, double> by_host;
  std::vector<std::string> order;
  for (size_t rank = 0; rank < times.size(); ++rank) {
    auto [it, added] = by_host.emplace(host_of(rank), times[rank].total());
    if (added) order.push_back(it->first);
    it->second = std::max(it->second, times[rank].total());
  }
  line += "; by host:";
  for (const auto& host : order) line += fmt::format(" {}={:.3f}", host, by_host[host]);
  return line;
}

void warm_up_communicator(MPI_Comm comm, std::chrono::milliseconds timeout) {
  int ready = 1;
  comm::bounded_allreduce(&ready, 1, MPI_INT, MPI_SUM, comm, timeout, "the communicator's warm-up");
  rank_startup_phases().done(StartupPhase::communicator);
}

void show_startup_phases(const StartupPhases& phases, timeline::Timeline& timeline) {
  const auto spans = phases.monotonic_spans();
  for (size_t phase = 0; phase < startup_phase_count; ++phase) {
    timeline.startup_span(fmt::format("startup: {}", phase_names[phase]), spans[phase].first, spans[phase].second);
  }
}

void report_startup_phases(const std::string& host, MPI_Comm comm, std::chrono::milliseconds timeout) {
  StartupPhases& phases = rank_startup_phases();
  phases.done(StartupPhase::first_step);
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const auto texts = comm::gather_texts(host + "\n" + encode(phases.times()), comm, timeout, "the start-up phases");
  if (rank != 0) return;
  std::vector<StartupTimes> times;
  std::vector<std::string> hosts;
  for (const auto& text : texts) {
    const auto newline = text.find('\n');
    hosts.push_back(text.substr(0, newline));
    times.push_back(decode(newline == std::string::npos ? std::string() : text.substr(newline + 1)));
  }
  log_info("{}", format_startup_line(times, hosts, phases.counted_from_train_start()));
}

}  // namespace train
