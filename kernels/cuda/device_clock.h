#pragma once
// kernels/cuda/device_clock.h: times taken on the device in stream order, for what a host clock cannot see
// without stopping the GPU: how long one stream waited for another (the compute stream for the gradient
// reductions at the end of backward). The device's global timer counts nanoseconds (1 us resolution or
// better on the GPUs we run on) and is the same for every stream of the device.

#include "kernels/cuda/handles.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <optional>

namespace train::kernels::cuda {

// Enqueues on `stream` the write of the global timer into *slot, when the stream gets there.
void record_device_time(cudaStream_t stream, unsigned long long* slot);

// Enqueues on `stream`: *seconds += max(0, *to - *from) / 1e9. Both times must have been written by work
// that `stream` has waited for.
void add_elapsed_seconds(cudaStream_t stream, const unsigned long long* from, const unsigned long long* to,
                         double* seconds);

// The global timer against the host's monotonic clock (std::chrono::steady_clock), to put device times on
// the host's timeline: a one-thread kernel on a stream of the highest priority writes the timer into mapped
// host memory while the host watches for it; of `samples` round trips the quickest gives device - host at
// its midpoint, and half of it is the uncertainty. It waits for nothing but its own kernel's turn on the GPU
// (never for queued work), at most `timeout` per sample; nullopt when no sample came back.
struct DeviceClockOffset {
  long long device_ns = 0;            // the timer when measured
  long long device_minus_host_ns = 0;
  long long uncertainty_ns = 0;
};

class DeviceClockProbe {
 public:
  DeviceClockProbe();  // the mapped word and the stream; throws std::runtime_error when CUDA refuses them
  ~DeviceClockProbe();
  DeviceClockProbe(const DeviceClockProbe&) = delete;
  DeviceClockProbe& operator=(const DeviceClockProbe&) = delete;
  std::optional<DeviceClockOffset> measure(int samples, std::chrono::milliseconds timeout);

 private:
  PinnedMemory host_;                     // one word, mapped
  unsigned long long* device_ = nullptr;  // the same word as the device addresses it
  Stream stream_;
  bool abandoned_ = false;  // a kernel that never reported may still write the word: it is never freed
};

}  // namespace train::kernels::cuda
