#include "runtime/timeline/trace_event.h"

#include <fmt/format.h>

namespace train::timeline {

const char* category_name(TraceCategory category) {
  switch (category) {
    case TraceCategory::step: return "step";
    case TraceCategory::data_wait: return "data_wait";
    case TraceCategory::compute: return "compute";
    case TraceCategory::exposed_communication: return "exposed_communication";
    case TraceCategory::pause: return "pause";
    case TraceCategory::detail: return "detail";
    case TraceCategory::host: return "host";
    case TraceCategory::counter: return "counter";
  }
  return "?";
}

std::string track_name(int track, bool device) {
  if (track == track::trainer) return "training thread";
  if (track == track::copy) return "GPU copy stream (host-to-device)";
  if (track == track::compute) return device ? "GPU compute stream" : "compute (training thread)";
  if (track == track::counters) return "counters";
  if (track == track::startup) return "start-up (train's start to the first step)";
  if (track >= track::loader(0)) return fmt::format("loader thread {}", track - track::loader(0));
  if (track >= track::bucket(0)) {
    return fmt::format("{}bucket {} allreduce", device ? "GPU communication stream: " : "", track - track::bucket(0));
  }
  return fmt::format("track {}", track);
}

}  // namespace train::timeline
