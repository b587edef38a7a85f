#include "runtime/timeline/trace_json.h"

#include <fmt/format.h>

#include <set>

namespace train::timeline {

namespace {

// Microseconds from the origin with nanosecond digits.
std::string trace_time(int64_t ns, const TraceClock& clock) {
  const int64_t t = ns + clock.offset_ns - clock.origin_ns;
  const int64_t whole = t / 1000, fraction = t % 1000;
  if (t < 0 && fraction != 0) return fmt::format("-{}.{:03}", -(t / 1000), -fraction);
  return fmt::format("{}.{:03}", whole, fraction < 0 ? -fraction : fraction);
}

std::string quoted(const std::string& text) { return nlohmann::json(text).dump(); }

std::string arguments(const std::vector<std::pair<std::string, double>>& args) {
  std::string out = "{";
  for (size_t i = 0; i < args.size(); ++i) {
    out += fmt::format("{}{}:{}", i == 0 ? "" : ",", quoted(args[i].first), nlohmann::json(args[i].second).dump());
  }
  return out + "}";
}

}  // namespace

std::string trace_events_json(const std::vector<TraceEvent>& events, int rank, const std::string& process_name,
                              const TraceClock& clock, bool device) {
  std::string out;
  auto add = [&](const std::string& event) {
    if (!out.empty()) out += ",\n";
    out += event;
  };
  add(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})", rank,
                  quoted(process_name)));
  add(fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}}}})", rank,
                  rank));
  std::set<int> tracks;
  for (const auto& event : events) {
    if (event.category != TraceCategory::counter) tracks.insert(event.track);
  }
  for (int track : tracks) {
    add(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", rank, track,
                    quoted(track_name(track, device))));
    add(fmt::format(R"({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":{}}}}})", rank,
                    track, track));
  }
  for (const auto& event : events) {
    if (event.category == TraceCategory::counter) {
      add(fmt::format(R"({{"ph":"C","name":{},"cat":"counter","pid":{},"tid":{},"ts":{},"args":{}}})",
                      quoted(event.name), rank, event.track, trace_time(event.begin_ns, clock), arguments(event.args)));
      continue;
    }
    const int64_t duration = std::max<int64_t>(0, event.end_ns - event.begin_ns);
    add(fmt::format(R"({{"ph":"X","name":{},"cat":"{}","pid":{},"tid":{},"ts":{},"dur":{}.{:03},"args":{}}})",
                    quoted(event.name), category_name(event.category), rank, event.track,
                    trace_time(event.begin_ns, clock), duration / 1000, duration % 1000, arguments(event.args)));
  }
  return out;
}

std::string trace_document(const std::vector<std::string>& parts, const nlohmann::json& other_data) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  for (const auto& part : parts) {
    if (part.empty()) continue;
    if (!first) out += ",\n";
    out += part;
    first = false;
  }
  out += "\n],\"otherData\":" + other_data.dump() + "}\n";
  return out;
}

}  // namespace train::timeline
