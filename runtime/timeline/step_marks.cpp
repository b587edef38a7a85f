#include "runtime/timeline/step_marks.h"

#include <fmt/format.h>

#include <cmath>

namespace train::timeline {

namespace {

// A step's marks are usable when the fixed ones it needs are there and follow one another in time, and
// every group and bucket mark lies within its pass.
bool consistent(const StepMarkLayout& layout, const int64_t* m, bool device) {
  auto at = [&](Mark mark) { return m[layout.at(mark)]; };
  const int64_t order[] = {at(Mark::forward_begin), at(Mark::forward_end), at(Mark::backward_end),
                           at(Mark::reductions_done), at(Mark::optimizer_end)};
  for (size_t i = 0; i < std::size(order); ++i) {
    if (order[i] <= 0 || (i > 0 && order[i] < order[i - 1])) return false;
  }
  if (device && (at(Mark::compute_begin) <= 0 || at(Mark::compute_begin) > at(Mark::forward_begin) ||
                 at(Mark::upload_begin) <= 0 || at(Mark::upload_end) < at(Mark::upload_begin))) {
    return false;
  }
  for (int g = 0; g < model::layer_groups; ++g) {
    const int64_t f = m[layout.forward_group(g)], b = m[layout.backward_group(g)];
    if (f != 0 && (f < at(Mark::forward_begin) || f > at(Mark::forward_end))) return false;
    if (b != 0 && (b < at(Mark::forward_end) || b > at(Mark::backward_end))) return false;
  }
  for (size_t b = 0; b < layout.buckets; ++b) {
    const int64_t start = m[layout.bucket_start(b)], end = m[layout.bucket_end(b)];
    if (start <= 0 || end < start) return false;
  }
  return true;
}

void span(std::vector<TraceEvent>& events, std::string name, TraceCategory category, int track, int64_t begin,
          int64_t end, std::vector<std::pair<std::string, double>> args = {}) {
  if (end < begin) end = begin;
  events.push_back(TraceEvent{std::move(name), category, track, begin, end, std::move(args)});
}

// The layer groups of one pass as children of its span: each from its mark to the next group's (in the
// pass's order) or the pass's end.
void group_spans(std::vector<TraceEvent>& events, const char* pass, const int64_t* m, const StepMarkLayout& layout,
                 bool backward, int64_t pass_end) {
  int64_t begin = 0;
  int group = -1;
  auto close = [&](int64_t end) {
    if (group >= 0) span(events, fmt::format("{} {}", pass, model::layer_group_name(group)), TraceCategory::detail,
                         track::compute, begin, end);
  };
  for (int i = 0; i < model::layer_groups; ++i) {
    const int g = backward ? model::layer_groups - 1 - i : i;
    const int64_t mark = m[backward ? layout.backward_group(g) : layout.forward_group(g)];
    if (mark == 0) continue;
    close(mark);
    begin = mark;
    group = g;
  }
  close(pass_end);
}

int64_t first_backward_mark(const int64_t* m, const StepMarkLayout& layout) {
  for (int g = model::layer_groups - 1; g >= 0; --g) {
    if (m[layout.backward_group(g)] != 0) return m[layout.backward_group(g)];
  }
  return m[layout.at(Mark::forward_end)];
}

}  // namespace

std::vector<int64_t> device_times_on_host(const std::vector<int64_t>& device, const ClockReading& first,
                                          const ClockReading& last) {
  const int64_t span = last.device_ns - first.device_ns;
  const long double drift = span > 0 ? static_cast<long double>(last.device_minus_host_ns - first.device_minus_host_ns) /
                                           static_cast<long double>(span)
                                     : 0.0L;
  std::vector<int64_t> host(device.size(), 0);
  for (size_t i = 0; i < device.size(); ++i) {
    if (device[i] == 0) continue;
    // floor keeps the correction monotonic in device time; with |drift| < 1 the host times keep their order.
    const auto correction =
        static_cast<int64_t>(std::floor(drift * static_cast<long double>(device[i] - first.device_ns)));
    host[i] = device[i] - first.device_minus_host_ns - correction;
  }
  return host;
}

void append_step_events(const RecordedSteps& recorded, int64_t first_step, std::vector<TraceEvent>& events,
                        size_t* skipped) {
  const StepMarkLayout& layout = recorded.layout;
  int64_t previous_end = 0;  // the last step's optimizer end, when that step was usable
  for (size_t s = 0; s < recorded.steps(); ++s) {
    const int64_t* m = recorded.row(s);
    const int64_t step = first_step + static_cast<int64_t>(s);
    if (!consistent(layout, m, recorded.device)) {
      ++*skipped;
      previous_end = 0;
      continue;
    }
    auto at = [&](Mark mark) { return m[layout.at(mark)]; };
    if (recorded.device) {
      // The compute stream's step: from the end of the previous one (or, for the first, from when the stream
      // reached it), so that the time it sat idle between steps is this step's wait for input.
      const int64_t begin = previous_end != 0 ? previous_end : at(Mark::compute_begin);
      span(events, fmt::format("step {}", step), TraceCategory::step, track::compute, begin, at(Mark::optimizer_end));
      span(events, "waiting for input", TraceCategory::data_wait, track::compute, begin, at(Mark::forward_begin));
      span(events, "host-to-device copy", TraceCategory::detail, track::copy, at(Mark::upload_begin),
           at(Mark::upload_end), {{"bytes", static_cast<double>(recorded.upload_bytes)}, {"step", double(step)}});
    }
    span(events, "forward", TraceCategory::compute, track::compute, at(Mark::forward_begin), at(Mark::forward_end));
    group_spans(events, "forward", m, layout, false, at(Mark::forward_end));
    const int64_t backward_begin = first_backward_mark(m, layout);
    span(events, "loss", TraceCategory::compute, track::compute, at(Mark::forward_end), backward_begin);
    span(events, "backward", TraceCategory::compute, track::compute, backward_begin, at(Mark::backward_end));
    group_spans(events, "backward", m, layout, true, at(Mark::backward_end));
    span(events, "waiting for reductions", TraceCategory::exposed_communication, track::compute,
         at(Mark::backward_end), at(Mark::reductions_done));
    span(events, "optimizer", TraceCategory::compute, track::compute, at(Mark::reductions_done),
         at(Mark::optimizer_end));
    for (size_t b = 0; b < layout.buckets; ++b) {
      const double bytes = b < recorded.bucket_bytes.size() ? static_cast<double>(recorded.bucket_bytes[b]) : 0.0;
      span(events, fmt::format("allreduce bucket {}", b), TraceCategory::detail, track::bucket(static_cast<int>(b)),
           m[layout.bucket_start(b)], m[layout.bucket_end(b)], {{"bytes", bytes}, {"step", double(step)}});
    }
    previous_end = at(Mark::optimizer_end);
  }
}

}  // namespace train::timeline
