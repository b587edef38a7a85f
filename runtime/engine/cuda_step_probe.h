// The CUDA engine's StepProbe (runtime/engine/step_observer.h): the observer's marks as device timestamps
// on the stream doing the work, and the log lines' sums kept on the device and copied back by the compute
// stream behind the steps queued so far, so that neither a mark nor a log line ever stops the GPU.
#pragma once

#include "kernels/cuda/device_clock.h"
#include "kernels/cuda/handles.h"
#include "runtime/engine/step_observer.h"
#include "runtime/model/gpu_resnet.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

namespace train {


class CudaStepProbe final : public StepProbe<model::DeviceStepResult> {
 public:
  struct Streams {
    cudaStream_t compute = nullptr, communication = nullptr, copy = nullptr;
  };
  // The engine's memory (with its out-of-memory wording) and its bounded wait for an event.
  using Allocate = std::function<kernels::cuda::DeviceMemory(size_t bytes)>;
  using Wait = std::function<void(cudaEvent_t event, const char* what)>;
  // Room for `mark_values` marks (settings.timeline's steps, taken when the engine is made: recording
  // never allocates; 0 without a timeline).
  CudaStepProbe(Streams streams, size_t mark_values, const Allocate& allocate, Wait wait);

  void start_marks(size_t values) override;
  void mark(StepLane lane, size_t index) override;
  void marks_done(size_t values) override;
  void take_marks(size_t values, timeline::RecordedSteps& recorded) override;
  // The last recorded step's upload, for the timeline's upload span.
  void set_upload_bytes(size_t bytes) { upload_bytes_ = bytes; }

  void add_step(const model::DeviceStepResult& result, int images) override;
  void reduction_wait_begins() override;
  void reduction_wait_ends() override;
  void copy_sums(int slot) override;
  const double* sums(int slot) override;

 private:
  cudaStream_t stream(StepLane lane) const;

  Streams streams_;
  Wait wait_;
  // The timeline's marks: device timestamps written in stream order into device_marks_; copied to
  // host_marks_ by the compute stream after the last recorded step, read an interval later; put on the
  // host's clock by the probe's measurements at the start and the end of the recording.
  size_t mark_capacity_ = 0;  // values
  bool marks_copy_enqueued_ = false;
  size_t upload_bytes_ = 0;
  kernels::cuda::DeviceMemory device_marks_;
  kernels::cuda::PinnedMemory host_marks_;
  kernels::cuda::Event marks_copied_, marks_zeroed_;
  std::unique_ptr<kernels::cuda::DeviceClockProbe> clock_probe_;
  std::optional<kernels::cuda::DeviceClockOffset> clock_at_start_;
  // The sums since the last copy, on the device: {loss x images, images, hits, reduction wait seconds}.
  // The reduction wait is measured on the device: the global timer at backward's end and after the last
  // bucket's allreduce (clock_[0], clock_[1]).
  kernels::cuda::DeviceMemory running_, clock_;
  // Each request's pinned slot of sum_count values, which the compute stream fills, and an event after it.
  kernels::cuda::PinnedMemory host_sums_;
  kernels::cuda::Event sums_copied_[sum_slots];
};

}  // namespace train
