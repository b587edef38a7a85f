#include "runtime/timeline/timeline_summary.h"

#include <fmt/format.h>

#include <algorithm>

namespace train::timeline {

namespace {

struct Interval {
  int64_t begin = 0, end = 0;
};

int64_t overlap(Interval a, Interval b) { return std::max<int64_t>(0, std::min(a.end, b.end) - std::max(a.begin, b.begin)); }

// `interval` less the parts of it inside the (sorted, disjoint) pauses.
int64_t unpaused(Interval interval, const std::vector<Interval>& pauses) {
  int64_t length = std::max<int64_t>(0, interval.end - interval.begin);
  for (const Interval& pause : pauses) length -= overlap(interval, pause);
  return length;
}

std::vector<Interval> merged_pauses(const std::vector<TraceEvent>& events) {
  std::vector<Interval> pauses;
  for (const auto& event : events) {
    if (event.category == TraceCategory::pause) pauses.push_back({event.begin_ns, event.end_ns});
  }
  std::sort(pauses.begin(), pauses.end(), [](Interval a, Interval b) { return a.begin < b.begin; });
  std::vector<Interval> merged;
  for (const Interval& pause : pauses) {
    if (!merged.empty() && pause.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, pause.end);
    } else {
      merged.push_back(pause);
    }
  }
  return merged;
}

}  // namespace

TimelineSummary summarize_timeline(const std::vector<TraceEvent>& events) {
  const std::vector<Interval> pauses = merged_pauses(events);
  std::vector<const TraceEvent*> counted;
  for (const auto& event : events) {
    if (event.category == TraceCategory::data_wait || event.category == TraceCategory::compute ||
        event.category == TraceCategory::exposed_communication) {
      counted.push_back(&event);
    }
  }
  TimelineSummary summary;
  int64_t step_ns = 0, data_ns = 0, compute_ns = 0, exposed_ns = 0;
  for (const auto& step : events) {
    if (step.category != TraceCategory::step) continue;
    ++summary.steps;
    const Interval range{step.begin_ns, step.end_ns};
    step_ns += unpaused(range, pauses);
    for (const TraceEvent* event : counted) {
      const Interval inside{std::max(range.begin, event->begin_ns), std::min(range.end, event->end_ns)};
      if (inside.end <= inside.begin) continue;
      const int64_t counted_ns = unpaused(inside, pauses);
      switch (event->category) {
        case TraceCategory::data_wait: data_ns += counted_ns; break;
        case TraceCategory::compute: compute_ns += counted_ns; break;
        default: exposed_ns += counted_ns; break;
      }
    }
  }
  summary.step_seconds = static_cast<double>(step_ns) * 1e-9;
  summary.data_wait_seconds = static_cast<double>(data_ns) * 1e-9;
  summary.compute_seconds = static_cast<double>(compute_ns) * 1e-9;
  summary.exposed_communication_seconds = static_cast<double>(exposed_ns) * 1e-9;
  return summary;
}

std::string format_summary_line(int rank, const std::string& host, const std::string& steps,
                                const TimelineSummary& summary) {
  const double per_step_ms = summary.steps > 0 ? summary.step_seconds * 1e3 / static_cast<double>(summary.steps) : 0;
  return fmt::format("timeline rank={} host={} steps={} step_ms={:.2f} data_wait={:.1f}% compute={:.1f}% "
                     "exposed_communication={:.1f}% other={:.1f}%",
                     rank, host, steps, per_step_ms, 100 * summary.share(summary.data_wait_seconds),
                     100 * summary.share(summary.compute_seconds),
                     100 * summary.share(summary.exposed_communication_seconds),
                     100 * summary.share(summary.other_seconds()));
}

}  // namespace train::timeline
