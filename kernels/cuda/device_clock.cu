// kernels/cuda/device_clock.cu: the global timer read in stream order (kernels/cuda/device_clock.h).

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_clock.h"

namespace train::kernels::cuda {
namespace {

__global__ void write_global_timer(unsigned long long* slot) {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  *slot = now;
}

__global__ void accumulate_elapsed(const unsigned long long* from, const unsigned long long* to, double* seconds) {
  const unsigned long long start = *from, end = *to;
  if (end > start) *seconds += static_cast<double>(end - start) * 1e-9;
}

}  // namespace

void record_device_time(cudaStream_t stream, unsigned long long* slot) {
  write_global_timer<<<1, 1, 0, stream>>>(slot);
  TRAIN_CUDA_CHECK_LAUNCH();
}

void add_elapsed_seconds(cudaStream_t stream, const unsigned long long* from, const unsigned long long* to,
                         double* seconds) {
  accumulate_elapsed<<<1, 1, 0, stream>>>(from, to, seconds);
  TRAIN_CUDA_CHECK_LAUNCH();
}

DeviceClockProbe::DeviceClockProbe()
    : host_(allocate_pinned(sizeof(unsigned long long), cudaHostAllocMapped)),
      stream_(make_stream(StreamPriority::highest)) {
  TRAIN_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_.get(), 0));
}

DeviceClockProbe::~DeviceClockProbe() {
  if (abandoned_) static_cast<void>(host_.release());  // the kernel may still come: the word stays allocated
}

std::optional<DeviceClockOffset> DeviceClockProbe::measure(int samples, std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  auto nanoseconds = [](clock::time_point t) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
  };
  std::optional<DeviceClockOffset> best;
  volatile unsigned long long* word = as<unsigned long long>(host_);
  for (int i = 0; i < samples && !abandoned_; ++i) {
    *word = 0;
    const clock::time_point sent = clock::now();
    write_global_timer<<<1, 1, 0, stream_.get()>>>(device_);
    TRAIN_CUDA_CHECK_LAUNCH();
    unsigned long long device_time = 0;
    while ((device_time = *word) == 0) {
      if (clock::now() - sent > timeout) {
        abandoned_ = true;  // the kernel may still come: the word stays allocated
        break;
      }
    }
    if (device_time == 0) break;
    const clock::time_point seen = clock::now();
    const long long round_trip = nanoseconds(seen) - nanoseconds(sent);
    if (!best || round_trip / 2 < best->uncertainty_ns) {
      best = DeviceClockOffset{static_cast<long long>(device_time),
                               static_cast<long long>(device_time) - (nanoseconds(sent) + round_trip / 2),
                               round_trip / 2};
    }
  }
  if (!abandoned_) TRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));  // its last kernel has written: it is done
  return best;
}

}  // namespace train::kernels::cuda
