// The one step observer both engines use (runtime/engine/cpu_engine.cpp, cuda_engine.cpp): what a training
// step reports besides doing its work. The engine's step names its phases and calls the observer between
// them (step_begins, mark, waiting_for_reductions, reductions_done, step_done); the observer keeps
//  - the timeline's marks while the timeline records (runtime/timeline/step_marks.h): it is the
//    timeline's StepRecorder, and while it records, the model's passes mark their layer groups and the
//    reducer each bucket's start and end;
//  - the sums the log lines read (RankStepSums): each step's loss, images and hits, and how long the step
//    waited for the other ranks' gradients, requested at a log line and taken an interval later.
// How a mark is taken and where the sums are kept is the engine's, its StepProbe: on the CPU the host's
// clock and host memory; on the GPU device timestamps and sums on the device, copied back without waiting.
#pragma once

#include "runtime/comm/gradient_buckets.h"
#include "runtime/comm/gradient_reducer.h"
#include "runtime/model/resnet_passes.h"
#include "runtime/timeline/step_marks.h"
#include "runtime/timeline/step_recorder.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <stdexcept>
#include <vector>

namespace train {

// This rank's sums over the steps between two requests for them (StepObserver::request_totals()), before
// the trainer adds them up over the ranks into JobStepSums (runtime/metrics_summary.h).
struct RankStepSums {
  double loss = 0;     // sum over steps of (mean loss of the batch) x (images in it)
  double images = 0;
  double correct = 0;  // top-1 hits (training-mode logits)
  int64_t steps = 0;
  // Seconds this rank waited for the other ranks' gradients: after its backward pass, until the last bucket
  // of the step was reduced (the CPU engine: its reducer's finish() on the host clock; the CUDA engine: the
  // compute stream's wait, timed on the device). The per-rank timing lines and the straggler report
  // (runtime/rank_timing.h) read it; a rank that waits long is waiting for a slower one.
  double reduction_wait_seconds = 0;
};

// The stream a mark is taken on (the CPU engine has one thread: every lane is the host's clock).
enum class StepLane { compute, communication, copy };

// The engine's half of its observer: how a mark is taken and where the sums are kept. `Result` is what the
// model's forward_and_loss returns (host values on the CPU, device pointers on the GPU).
template <typename Result>
class StepProbe {
 public:
  // The sums kept per request: {loss x images, images, hits, reduction wait seconds}.
  static constexpr int sum_count = 4;
  static constexpr int sum_slots = 4;  // requests in flight at most (the trainer keeps two)

  // ---- marks -------------------------------------------------------------------------------------------
  // Room for `values` marks from now on; zero them before the first (enqueues).
  virtual void start_marks(size_t values) = 0;
  // marks[index] = now, in `lane`'s order.
  virtual void mark(StepLane lane, size_t index) = 0;
  // The last recorded step is enqueued (its marks may be copied back behind it).
  virtual void marks_done(size_t values) = 0;
  // The first `values` marks on the host's clock, into `recorded` (marks, clock, device); waits for them.
  virtual void take_marks(size_t values, timeline::RecordedSteps& recorded) = 0;

  // ---- sums --------------------------------------------------------------------------------------------
  virtual void add_step(const Result& result, int images) = 0;
  // Around the wait for the reductions: its length goes into the running sums.
  virtual void reduction_wait_begins() = 0;
  virtual void reduction_wait_ends() = 0;
  // The running sums into `slot` and then reset (enqueues); the slot's values once they are there (waits).
  virtual void copy_sums(int slot) = 0;
  virtual const double* sums(int slot) = 0;

 protected:
  ~StepProbe() = default;
};

// What the trainer reads of an engine's steps, whatever the engine: the log lines' sums and the timeline's
// recorder (runtime/engine/engine.h hands them on).
class StepReports : public timeline::StepRecorder {
 public:
  // Marks the end of a stretch of steps: their sums are taken later by take_totals() (enqueues).
  virtual void request_totals() = 0;
  // The sums of the oldest stretch requested and not yet taken (waits); with none requested, requests one.
  virtual RankStepSums take_totals() = 0;

 protected:
  ~StepReports() = default;
};

template <typename Result>
class StepObserver final : public StepReports {
 public:
  using Probe = StepProbe<Result>;

  // While recording, `model`'s passes and `reducer`'s buckets mark too; both must outlive the observer.
  template <typename Model>
  StepObserver(Probe& probe, Model& model, comm::GradientReducer& reducer)
      : probe_(probe),
        reducer_(reducer),
        set_pass_marks_([&model](model::PassMarks marks) { model.set_pass_marks(std::move(marks)); }) {}

  // ---- the step's named points (the engine's step calls them in this order) ----------------------------
  // A step starts: whether the timeline marks it.
  bool step_begins() {
    marked_ = marking_ && cursor_.begin_step();
    return marked_;
  }
  bool marked() const { return marked_; }
  // `mark` of this step on `lane`, when the step is marked.
  void mark(timeline::Mark mark, StepLane lane = StepLane::compute) {
    if (marked_) probe_.mark(lane, cursor_.index(cursor_.layout().at(mark)));
  }
  // Backward is done (every bucket's reduction started); the wait for the last ones begins.
  void waiting_for_reductions() { probe_.reduction_wait_begins(); }
  // The reductions are done (the optimizer may read the gradients).
  void reductions_done() {
    mark(timeline::Mark::reductions_done);
    probe_.reduction_wait_ends();
  }
  // The optimizer is done: the step counts, with `result` over `images` images.
  void step_done(const Result& result, int images) {
    mark(timeline::Mark::optimizer_end);
    if (marked_ && !cursor_.more()) {
      stop_marking();
      probe_.marks_done(cursor_.rows_begun() * cursor_.layout().per_step());
    }
    marked_ = false;
    probe_.add_step(result, images);
    ++steps_since_request_;
  }

  // ---- the log lines' sums ---------------------------------------------------------------------------------
  void request_totals() override {
    if (requested_.size() == static_cast<size_t>(Probe::sum_slots)) {
      throw std::logic_error("StepObserver: totals requested and never taken");
    }
    const int slot = next_slot_;
    next_slot_ = (next_slot_ + 1) % Probe::sum_slots;
    probe_.copy_sums(slot);
    requested_.push_back(Requested{slot, steps_since_request_});
    steps_since_request_ = 0;
  }
  RankStepSums take_totals() override {
    if (requested_.empty()) request_totals();
    const Requested oldest = requested_.front();
    const double* sums = probe_.sums(oldest.slot);
    requested_.pop_front();
    RankStepSums totals{sums[0], sums[1], sums[2], oldest.steps};
    totals.reduction_wait_seconds = sums[3];
    return totals;
  }

  // ---- the timeline's recorder ---------------------------------------------------------------------------
  void record_steps(int64_t steps) override {
    timeline::StepMarkLayout layout;
    layout.buckets = reducer_.plan().buckets.size();
    cursor_.start(layout, steps);
    marking_ = steps > 0;
    if (!marking_) return;
    probe_.start_marks(static_cast<size_t>(steps) * layout.per_step());
    set_pass_marks_([this](model::Pass pass, int group) {
      const timeline::StepMarkLayout& l = cursor_.layout();
      const bool forward = pass == model::Pass::forward;
      const size_t slot = group < 0 ? l.at(forward ? timeline::Mark::forward_end : timeline::Mark::backward_end)
                                    : (forward ? l.forward_group(group) : l.backward_group(group));
      probe_.mark(StepLane::compute, cursor_.index(slot));
    });
    reducer_.set_bucket_hooks(comm::BucketHooks{
        [this](size_t b, size_t) { probe_.mark(StepLane::communication, cursor_.index(cursor_.layout().bucket_start(b))); },
        [this](size_t b, size_t) { probe_.mark(StepLane::communication, cursor_.index(cursor_.layout().bucket_end(b))); }});
  }
  timeline::RecordedSteps take_recorded_steps() override {
    if (marking_) stop_marking();
    timeline::RecordedSteps recorded;
    recorded.layout = cursor_.layout();
    for (size_t b = 0; b < reducer_.plan().buckets.size(); ++b) recorded.bucket_bytes.push_back(reducer_.plan().bytes(b));
    probe_.take_marks(cursor_.rows_begun() * recorded.layout.per_step(), recorded);
    cursor_.start(recorded.layout, 0);
    return recorded;
  }

 private:
  struct Requested {
    int slot = 0;
    int64_t steps = 0;
  };
  void stop_marking() {
    marking_ = false;
    set_pass_marks_({});
    reducer_.set_bucket_hooks({});
  }

  Probe& probe_;
  comm::GradientReducer& reducer_;
  std::function<void(model::PassMarks)> set_pass_marks_;
  // The timeline's marks: while cursor_ has steps to record, the model's passes and the reducer's buckets
  // mark too (their hooks are set only then).
  timeline::StepMarkCursor cursor_;
  bool marking_ = false, marked_ = false;
  // The log lines' sums: requested and not yet taken, each in a slot of the probe's.
  std::deque<Requested> requested_;
  int next_slot_ = 0;
  int64_t steps_since_request_ = 0;
};

}  // namespace train
