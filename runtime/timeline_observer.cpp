#include "runtime/timeline_observer.h"

#include "runtime/startup_phases.h"

namespace train {
namespace {

struct SpanName {
  const char* name;
  timeline::TraceCategory category;
};

// The names and categories the timeline's files and summary use for the trainer's own spans.
SpanName span_name(TrainingPhase phase) {
  switch (phase) {
    case TrainingPhase::step: return {"train_step", timeline::TraceCategory::detail};
    case TrainingPhase::stop_vote: return {"stop vote", timeline::TraceCategory::exposed_communication};
    case TrainingPhase::log_line: return {"log line", timeline::TraceCategory::detail};
    case TrainingPhase::validation: return {"validation", timeline::TraceCategory::pause};
    case TrainingPhase::checkpoint: return {"checkpoint", timeline::TraceCategory::pause};
  }
  return {"?", timeline::TraceCategory::detail};
}

}  // namespace

void TimelineObserver::phase_begins(TrainingPhase phase) {
  const SpanName span = span_name(phase);
  spans_[static_cast<size_t>(phase)].emplace(timeline_.get(), span.name, span.category);
}

void TimelineObserver::phase_ends(TrainingPhase phase) { spans_[static_cast<size_t>(phase)].reset(); }

void TimelineObserver::step_done(int64_t step) {
  timeline_->steps_done(step, steps_);
  if (!startup_shown_ && rank_startup_phases().noted(StartupPhase::first_step)) {
    startup_shown_ = true;
    show_startup_phases(rank_startup_phases(), *timeline_);
  }
}

}  // namespace train
