// The marks both engines take from their model and reducer while they record steps (runtime/timeline/
// step_marks.h): each layer group's start and each pass's end from the model's passes, each bucket's
// reduction's start and end from the reducer, put at their slots of the cursor's layout. Each engine says
// only how a mark is taken: the CPU engine reads the host's clock; the GPU engine writes a timestamp on the
// compute stream (passes) or the communication stream (buckets).
#pragma once

#include "runtime/comm/gradient_buckets.h"
#include "runtime/comm/gradient_reducer.h"
#include "runtime/model/resnet_passes.h"
#include "runtime/timeline/step_marks.h"

#include <cstddef>
#include <vector>

namespace train::timeline {

// From now on `model` and `reducer` call `mark_compute(slot)` and `mark_communication(slot)` (the slot in
// the current row of `cursor`, which must outlive the marks) at each of their marks.
template <typename Model, typename MarkCompute, typename MarkCommunication>
void start_engine_marks(Model& model, comm::GradientReducer& reducer, const StepMarkCursor& cursor,
                        MarkCompute mark_compute, MarkCommunication mark_communication) {
  model.set_pass_marks([&cursor, mark_compute](model::Pass pass, int group) {
    const StepMarkLayout& l = cursor.layout();
    if (pass == model::Pass::forward) {
      mark_compute(group < 0 ? l.at(Mark::forward_end) : l.forward_group(group));
    } else {
      mark_compute(group < 0 ? l.at(Mark::backward_end) : l.backward_group(group));
    }
  });
  reducer.set_bucket_hooks(comm::BucketHooks{
      [&cursor, mark_communication](size_t b, size_t) { mark_communication(cursor.layout().bucket_start(b)); },
      [&cursor, mark_communication](size_t b, size_t) { mark_communication(cursor.layout().bucket_end(b)); }});
}

// No more marks from `model` and `reducer`.
template <typename Model>
void stop_engine_marks(Model& model, comm::GradientReducer& reducer) {
  model.set_pass_marks({});
  reducer.set_bucket_hooks({});
}

// What each bucket's reduction sends, by bucket (RecordedSteps::bucket_bytes).
inline std::vector<size_t> bucket_bytes(const comm::BucketPlan& plan) {
  std::vector<size_t> bytes;
  for (size_t b = 0; b < plan.buckets.size(); ++b) bytes.push_back(plan.bytes(b));
  return bytes;
}

}  // namespace train::timeline
