// The timeline (runtime/timeline/timeline.h) as an observer of the training loop: it owns the job's
// Timeline and hands it the engine's StepRecorder, so that neither the trainer's loop nor the timeline
// knows the other's types.
#pragma once

#include "runtime/timeline/step_recorder.h"
#include "runtime/timeline/timeline.h"
#include "runtime/training_observer.h"

#include <array>
#include <memory>
#include <optional>

namespace train {

class TimelineObserver final : public TrainingObserver {
 public:
  // `steps` (the engine's step observer) must outlive it.
  TimelineObserver(std::unique_ptr<timeline::Timeline> timeline, timeline::StepRecorder& steps)
      : timeline_(std::move(timeline)), steps_(steps) {}

  // The loader's reports (its decoding threads), for the loader the trainer opens.
  std::shared_ptr<data::LoaderObserver> loader_observer() const { return timeline_->loader_observer(); }

  void training_starts(int64_t step, int64_t total_steps) override { timeline_->start(step, total_steps, steps_); }
  void batch_arrived(const data::Batch* batch, int64_t waited_from, int64_t arrived) override {
    if (batch != nullptr) timeline_->batch_arrived(*batch, waited_from, arrived);
  }
  void phase_begins(TrainingPhase phase) override;
  void phase_ends(TrainingPhase phase) override;
  // After the first step, the rank's start-up phases (runtime/startup_phases.h) too.
  void step_done(int64_t step) override;
  void pause_done(int64_t step) override { timeline_->finish_if_due(step, steps_, /*final=*/false); }
  void training_ends(const TrainingEnd& end) override { timeline_->finish_if_due(end.step, steps_, /*final=*/true); }

 private:
  std::unique_ptr<timeline::Timeline> timeline_;
  timeline::StepRecorder& steps_;
  // Each phase's span, begun while the timeline records (no clock is read otherwise).
  std::array<std::optional<timeline::TimelineSpan>, 5> spans_;
  bool startup_shown_ = false;
};

}  // namespace train
