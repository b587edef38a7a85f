#include "runtime/timeline/timeline.h"

#include "common/log.h"
#include "common/atomic_file.h"
#include "common/monotonic_clock.h"
#include "runtime/comm/gather_text.h"
#include "runtime/timeline/timeline_summary.h"
#include "runtime/timeline/trace_json.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace train::timeline {

// The loader's pieces of work while the timeline records (runtime/data/loader_timing.h).
class LoaderRecorder final : public data::LoaderObserver {
 public:
  bool active() const override { return active_.load(std::memory_order_relaxed); }
  void loaded(const data::LoadedPiece& piece) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pieces_.size() < max_pieces) {
      pieces_.push_back(piece);
    } else {
      ++dropped_;
    }
  }
  void set_active(bool active) { active_.store(active, std::memory_order_relaxed); }
  // The stages of batch (epoch, index) summed over the pieces in so far (the latest pieces first).
  data::SampleStageTimes batch_stages(int64_t epoch, int64_t index, int* pieces) const {
    std::lock_guard<std::mutex> lock(mutex_);
    data::SampleStageTimes sum;
    *pieces = 0;
    for (auto it = pieces_.rbegin(); it != pieces_.rend(); ++it) {
      if (it->epoch != epoch || it->index != index) continue;
      ++*pieces;
      for (int s = 0; s < data::sample_stages; ++s) sum.nanoseconds[s] += it->stages.nanoseconds[s];
    }
    return sum;
  }
  std::vector<data::LoadedPiece> take(size_t* dropped) {
    std::lock_guard<std::mutex> lock(mutex_);
    *dropped = dropped_;
    return std::move(pieces_);
  }

 private:
  static constexpr size_t max_pieces = max_timeline_events / 2;
  std::atomic<bool> active_{false};
  mutable std::mutex mutex_;
  std::vector<data::LoadedPiece> pieces_;
  size_t dropped_ = 0;
};

namespace {

bool counted(TraceCategory category) {
  return category == TraceCategory::step || category == TraceCategory::data_wait ||
         category == TraceCategory::compute || category == TraceCategory::exposed_communication;
}

double milliseconds(int64_t ns) { return static_cast<double>(ns) * 1e-6; }

}  // namespace

Timeline::Timeline(const TimelineOptions& options, const RankIdentity& identity, MPI_Comm comm,
                   std::chrono::milliseconds timeout)
    : directory_(options.directory),
      output_dir_(options.output_dir),
      host_(options.host),
      identity_(identity),
      comm_(comm),
      timeout_(timeout),
      device_(options.device),
      first_(options.steps.first),
      last_(options.steps.last),
      loader_(std::make_shared<LoaderRecorder>()) {
  alignment_ = align_clocks(identity, comm, timeout);
}

void Timeline::start(int64_t step, int64_t total_steps, StepRecorder& recorder) {
  const int64_t asked_last = last_;
  last_ = std::min(last_, total_steps);
  if (identity_.rank == 0) {
    if (first_ > last_ || step >= last_) {
      log_info("warning: timeline: steps {}-{} are not among the steps this job runs ({} to {}): nothing is recorded",
               first_, asked_last, step + 1, total_steps);
    } else {
      log_info("timeline: recording steps {}-{} of every rank into {} (rank-R.json, and timeline.json with all ranks)",
               std::max(first_, step + 1), last_, directory_.string());
    }
  }
  steps_done(step, recorder);
}

Timeline::~Timeline() { loader_->set_active(false); }

std::shared_ptr<data::LoaderObserver> Timeline::loader_observer() const { return loader_; }

void Timeline::steps_done(int64_t step, StepRecorder& recorder) {
  if (state_ == State::waiting && step >= first_ - 1 && step < last_) {
    recorder.record_steps(last_ - step);
    recorded_first_ = step + 1;
    recorded_last_ = step;
    step_begin_ = monotonic_ns();
    loader_->set_active(true);
    state_ = State::recording;
    return;
  }
  if (state_ != State::recording) return;
  const int64_t now = monotonic_ns();
  host_span(device_ ? fmt::format("step {} (host)", step) : fmt::format("step {}", step),
            device_ ? TraceCategory::host : TraceCategory::step, step_begin_, now);
  step_begin_ = now;
  recorded_last_ = step;
  if (step >= last_) {
    loader_->set_active(false);
    state_ = State::recorded;
  }
}

void Timeline::batch_arrived(const data::Batch& batch, int64_t waited_from, int64_t arrived) {
  if (state_ != State::recording) return;
  host_span("waiting for data", TraceCategory::data_wait, waited_from, arrived);
  int pieces = 0;
  const data::SampleStageTimes stages = loader_->batch_stages(batch.position.epoch, batch.position.index, &pieces);
  if (pieces == 0) return;  // decoded before the recording started
  add(TraceEvent{"loader (ms per batch, all threads)", TraceCategory::counter, track::counters, arrived, arrived,
                 {{"read", milliseconds(stages.nanoseconds[0])},
                  {"decode", milliseconds(stages.nanoseconds[1])},
                  {"augment", milliseconds(stages.nanoseconds[2])}}});
}

void Timeline::host_span(std::string name, TraceCategory category, int64_t begin_ns, int64_t end_ns) {
  if (state_ != State::recording) return;
  if (device_ && counted(category)) category = TraceCategory::host;
  add(TraceEvent{std::move(name), category, track::trainer, begin_ns, end_ns, {}});
}

void Timeline::startup_span(std::string name, int64_t begin_ns, int64_t end_ns) {
  const bool holds_step_one = (state_ == State::recording || state_ == State::recorded) && recorded_first_ == 1;
  if (!holds_step_one) return;
  add(TraceEvent{std::move(name), TraceCategory::detail, track::startup, begin_ns, end_ns, {}});
}

void Timeline::add(TraceEvent event) {
  if (host_events_.size() >= max_timeline_events / 4) {
    ++dropped_;
    return;
  }
  host_events_.push_back(std::move(event));
}

void Timeline::finish_if_due(int64_t step, StepRecorder& recorder, bool final) {
  if (state_ == State::recording && final) {
    loader_->set_active(false);
    state_ = State::recorded;
  }
  if (state_ != State::recorded || (!final && step <= last_)) return;
  state_ = State::done;
  finish(recorder);
}

std::vector<TraceEvent> Timeline::loader_events() {
  size_t dropped = 0;
  std::vector<TraceEvent> events;
  for (const auto& piece : loader_->take(&dropped)) {
    events.push_back(TraceEvent{"load batch", TraceCategory::detail, track::loader(piece.thread), piece.begin_ns,
                                piece.end_ns,
                                {{"epoch", static_cast<double>(piece.epoch)},
                                 {"first_sample_of_shard", static_cast<double>(piece.index)},
                                 {"samples", static_cast<double>(piece.samples)},
                                 {"read_ms", milliseconds(piece.stages.nanoseconds[0])},
                                 {"decode_ms", milliseconds(piece.stages.nanoseconds[1])},
                                 {"augment_ms", milliseconds(piece.stages.nanoseconds[2])}}});
  }
  dropped_ += dropped;
  return events;
}

void Timeline::write(const std::string& path, const std::string& content) const {
  try {
    make_folders_below(output_dir_, directory_);  // never through a link planted at output/data
    write_file_atomically(path, content);
  } catch (const std::exception& error) {
    log_info("warning: rank {}: timeline: could not write {}: {}", identity_.rank, path, error.what());
  }
}

// Collective: every rank's events into its file and its summary; rank 0 merges them and prints every rank's.
void Timeline::finish(StepRecorder& recorder) {
  RecordedSteps recorded = recorder.take_recorded_steps();
  std::vector<TraceEvent> events = std::move(host_events_);
  host_events_.clear();
  std::vector<TraceEvent> loader = loader_events();
  events.insert(events.end(), loader.begin(), loader.end());
  size_t skipped = 0;
  append_step_events(recorded, recorded_first_, events, &skipped);
  if (events.size() > max_timeline_events) {
    dropped_ += events.size() - max_timeline_events;
    events.resize(max_timeline_events);
  }
  const TimelineSummary summary = summarize_timeline(events);
  const std::string steps = fmt::format("{}-{}", recorded_first_, recorded_last_);
  nlohmann::json mine = {{"rank", identity_.rank},
                         {"host", host_},
                         {"steps", steps},
                         {"device", device_ ? "cuda" : "cpu"},
                         {"summary",
                          {{"steps", summary.steps},
                           {"step_seconds", summary.step_seconds},
                           {"data_wait_seconds", summary.data_wait_seconds},
                           {"compute_seconds", summary.compute_seconds},
                           {"exposed_communication_seconds", summary.exposed_communication_seconds},
                           {"other_seconds", summary.other_seconds()}}},
                         {"clock",
                          {{"offset_to_rank_0_ns", alignment_.clock.offset_ns},
                           {"uncertainty_ns", alignment_.uncertainty_ns},
                           {"measured_by_rank", alignment_.leader},
                           {"engine_marks", recorded.clock}}},
                         {"steps_with_incomplete_marks", skipped},
                         {"events_dropped", dropped_}};
  const std::string part = trace_events_json(events, identity_.rank,
                                             fmt::format("rank {} ({})", identity_.rank, host_), alignment_.clock,
                                             device_);
  write((directory_ / fmt::format("rank-{}.json", identity_.rank)).string(),
        trace_document({part}, {{"timeline", mine}}));
  if (skipped > 0 || dropped_ > 0) {
    log_info("warning: rank {}: timeline: {} recorded steps had incomplete marks and {} events were left out (at "
             "most {} per rank)",
             identity_.rank, skipped, dropped_, max_timeline_events);
  }

  const std::vector<std::string> summaries =
      comm::gather_texts(mine.dump(), comm_, timeout_, "the timeline's summaries");
  const std::vector<std::string> parts = comm::gather_texts(part, comm_, timeout_, "the timeline's events");
  if (identity_.rank != 0) return;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& text : summaries) ranks.push_back(nlohmann::json::parse(text));
  const std::string merged = trace_document(parts, {{"timeline", {{"steps", steps}, {"ranks", ranks}}}});
  const std::string path = (directory_ / "timeline.json").string();
  write(path, merged);
  for (const auto& rank : ranks) {
    const auto& s = rank["summary"];
    TimelineSummary each;
    each.steps = s["steps"].get<int64_t>();
    each.step_seconds = s["step_seconds"].get<double>();
    each.data_wait_seconds = s["data_wait_seconds"].get<double>();
    each.compute_seconds = s["compute_seconds"].get<double>();
    each.exposed_communication_seconds = s["exposed_communication_seconds"].get<double>();
    write_line(1, format_summary_line(rank["rank"].get<int>(), rank["host"].get<std::string>(),
                                      rank["steps"].get<std::string>(), each));
  }
  write_line(1, fmt::format("timeline: {} ({} bytes, {} ranks; open it in ui.perfetto.dev or chrome://tracing)", path,
                            merged.size(), parts.size()));
}

TimelineSpan::TimelineSpan(Timeline* timeline, const char* name, TraceCategory category)
    : timeline_(timeline != nullptr && timeline->recording() ? timeline : nullptr), name_(name), category_(category) {
  if (timeline_ != nullptr) begin_ = monotonic_ns();
}

TimelineSpan::~TimelineSpan() {
  if (timeline_ != nullptr) timeline_->host_span(name_, category_, begin_, monotonic_ns());
}

}  // namespace train::timeline
