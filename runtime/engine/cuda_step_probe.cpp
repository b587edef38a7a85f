#include "runtime/engine/cuda_step_probe.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/step_sums.h"
#include "runtime/timeline/step_marks.h"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace train {

namespace cuda = kernels::cuda;

CudaStepProbe::CudaStepProbe(Streams streams, size_t mark_values, const Allocate& allocate, Wait wait)
    : streams_(streams), wait_(std::move(wait)), mark_capacity_(mark_values) {
  running_ = allocate(sizeof(double) * sum_count);
  TRAIN_CUDA_CHECK(cudaMemsetAsync(running_.get(), 0, sizeof(double) * sum_count, streams_.compute));
  clock_ = allocate(sizeof(unsigned long long) * 2);
  host_sums_ = cuda::allocate_pinned(sizeof(double) * sum_count * sum_slots);
  for (auto& event : sums_copied_) event = cuda::make_event();
  if (mark_capacity_ > 0) {
    const size_t bytes = sizeof(unsigned long long) * mark_capacity_;
    device_marks_ = allocate(bytes);
    host_marks_ = cuda::allocate_pinned(bytes);
    marks_copied_ = cuda::make_event();
    marks_zeroed_ = cuda::make_event();
    clock_probe_ = std::make_unique<cuda::DeviceClockProbe>();
  }
}

cudaStream_t CudaStepProbe::stream(StepLane lane) const {
  switch (lane) {
    case StepLane::communication: return streams_.communication;
    case StepLane::copy: return streams_.copy;
    case StepLane::compute: break;
  }
  return streams_.compute;
}

void CudaStepProbe::mark(StepLane lane, size_t index) {
  cuda::record_device_time(stream(lane), static_cast<unsigned long long*>(device_marks_.get()) + index);
}

// Zeroed in the copy stream's order, which every mark of the coming steps follows: the copy stream's own,
// the compute stream's (it waits for the zeroing below, then for each upload), the communication stream's
// (it waits for the compute stream).
void CudaStepProbe::start_marks(size_t values) {
  if (values > mark_capacity_) {
    throw std::logic_error(fmt::format("CudaStepProbe: {} marks to record, room for {}", values, mark_capacity_));
  }
  marks_copy_enqueued_ = false;
  TRAIN_CUDA_CHECK(cudaMemsetAsync(device_marks_.get(), 0, sizeof(unsigned long long) * values, streams_.copy));
  // The compute stream's first mark (compute_begin) comes before its wait for the upload: it waits here.
  TRAIN_CUDA_CHECK(cudaEventRecord(marks_zeroed_.get(), streams_.copy));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(streams_.compute, marks_zeroed_.get(), 0));
  clock_at_start_ = clock_probe_->measure(16, std::chrono::milliseconds(1000));
}

// After every recorded step's work on the compute stream, which has by then waited for the copy stream's
// and the communication stream's marks of those steps (the uploads' and the reductions' events).
void CudaStepProbe::marks_done(size_t values) {
  const size_t bytes = sizeof(unsigned long long) * values;
  if (bytes > 0) {
    TRAIN_CUDA_CHECK(cudaMemcpyAsync(host_marks_.get(), device_marks_.get(), bytes, cudaMemcpyDeviceToHost,
                                     streams_.compute));
  }
  TRAIN_CUDA_CHECK(cudaEventRecord(marks_copied_.get(), streams_.compute));
  marks_copy_enqueued_ = true;
}

// The device's times on the host's clock: device - host measured at the start and at the end of the
// recording, interpolated between them by device time (the two clocks may drift apart).
void CudaStepProbe::take_marks(size_t values, timeline::RecordedSteps& recorded) {
  recorded.device = true;
  recorded.upload_bytes = upload_bytes_;
  if (values == 0 || mark_capacity_ == 0) return;
  if (!marks_copy_enqueued_) marks_done(values);  // training ended inside the range
  wait_(marks_copied_.get(), "the timeline's marks of the recorded steps");
  const std::optional<cuda::DeviceClockOffset> at_end = clock_probe_->measure(16, std::chrono::milliseconds(1000));
  if (!clock_at_start_ && !at_end) {
    recorded.clock = "none: the GPU's clock could not be measured against the host's, so its marks are left out";
    return;
  }
  const cuda::DeviceClockOffset first = clock_at_start_ ? *clock_at_start_ : *at_end;
  const cuda::DeviceClockOffset last = at_end ? *at_end : *clock_at_start_;
  const auto* device_marks = static_cast<const unsigned long long*>(host_marks_.get());
  std::vector<int64_t> device(values);
  for (size_t i = 0; i < device.size(); ++i) device[i] = static_cast<int64_t>(device_marks[i]);
  recorded.marks =
      timeline::device_times_on_host(device, timeline::ClockReading{first.device_ns, first.device_minus_host_ns},
                                     timeline::ClockReading{last.device_ns, last.device_minus_host_ns});
  recorded.clock = fmt::format("device timestamps (%globaltimer) on the host's clock, offset measured {} and {} "
                               "(uncertainty {} ns and {} ns)",
                               clock_at_start_ ? "at the start" : "-", at_end ? "at the end" : "-",
                               clock_at_start_ ? clock_at_start_->uncertainty_ns : -1,
                               at_end ? at_end->uncertainty_ns : -1);
  clock_at_start_.reset();
}

void CudaStepProbe::add_step(const model::DeviceStepResult& result, int images) {
  cuda::add_step_sums(streams_.compute, result.loss, result.correct, images, static_cast<double*>(running_.get()));
}

// Every bucket's allreduce is enqueued by now: time backward's end and the last reduction's.
void CudaStepProbe::reduction_wait_begins() {
  auto* clock = static_cast<unsigned long long*>(clock_.get());
  cuda::record_device_time(streams_.compute, clock);
  cuda::record_device_time(streams_.communication, clock + 1);
}

// After the compute stream's wait for the reductions: add what it waited.
void CudaStepProbe::reduction_wait_ends() {
  auto* clock = static_cast<unsigned long long*>(clock_.get());
  cuda::add_elapsed_seconds(streams_.compute, clock, clock + 1, static_cast<double*>(running_.get()) + 3);
}

// The sums since the last copy, copied back by the compute stream after the steps queued so far while the
// GPU goes on: a log line never stops the GPU (runtime/trainer.cpp prints it one interval later).
void CudaStepProbe::copy_sums(int slot) {
  double* host = static_cast<double*>(host_sums_.get()) + sum_count * slot;
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(host, running_.get(), sizeof(double) * sum_count, cudaMemcpyDeviceToHost,
                                   streams_.compute));
  TRAIN_CUDA_CHECK(cudaMemsetAsync(running_.get(), 0, sizeof(double) * sum_count, streams_.compute));
  TRAIN_CUDA_CHECK(cudaEventRecord(sums_copied_[slot].get(), streams_.compute));
}

const double* CudaStepProbe::sums(int slot) {
  wait_(sums_copied_[slot].get(), "the steps' loss and hits");
  return static_cast<const double*>(host_sums_.get()) + sum_count * slot;
}

}  // namespace train
