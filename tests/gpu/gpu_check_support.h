#pragma once
// tests/gpu/gpu_check_support.h: what every GPU-vs-CPU check needs: device buffers that upload and
// download through fp32 host vectors (bf16 rounded to nearest even on the host, as the GPU rounds),
// NaN poisoning, seeded random data, the relative-error metric, cudaEvent timing, one op's poisoned and
// repeated runs, the result table, and whether there is a GPU at all.

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops_cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace train::gpu_check {

using kernels::cuda::bf16;

// ---- element types --------------------------------------------------------------------------------

inline std::uint16_t bf16_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                     // round to nearest, ties to even
  return static_cast<std::uint16_t>(u >> 16);
}
inline float bf16_value(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <typename T>
struct Element;
template <>
struct Element<float> {
  using Bits = float;
  static Bits encode(float v) { return v; }
  static float decode(Bits b) { return b; }
  static constexpr const char* name = "fp32";
};
template <>
struct Element<bf16> {
  using Bits = std::uint16_t;
  static Bits encode(float v) { return bf16_bits(v); }
  static float decode(Bits b) { return bf16_value(b); }
  static constexpr const char* name = "bf16";
};
template <>
struct Element<std::int32_t> {
  using Bits = std::int32_t;
  static Bits encode(float v) { return static_cast<std::int32_t>(v); }
  static float decode(Bits b) { return static_cast<float>(b); }
  static constexpr const char* name = "int32";
};

// The value v takes once stored as T (what the CPU reference must see to compute from the same inputs).
template <typename T>
std::vector<float> representable(std::vector<float> values) {
  for (float& v : values) v = Element<T>::decode(Element<T>::encode(v));
  return values;
}

// ---- device buffers ---------------------------------------------------------------------------------

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count)
      : count_(count),
        memory_(kernels::cuda::allocate_device(sizeof(T) * count)),
        data_(kernels::cuda::as<T>(memory_)) {}
  DeviceBuffer(std::size_t count, const std::vector<float>& values) : DeviceBuffer(count) { upload(values); }

  T* get() const { return data_; }
  std::size_t size() const { return count_; }

  void upload(const std::vector<float>& values) {
    std::vector<typename Element<T>::Bits> bits(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) bits[i] = Element<T>::encode(values[i]);
    const std::size_t bytes = sizeof(T) * std::min(values.size(), count_);
    TRAIN_CUDA_CHECK(cudaMemcpy(data_, bits.data(), bytes, cudaMemcpyHostToDevice));
    // A pageable-memory copy may return before its DMA lands: wait, so no op on any stream can see the
    // old contents.
    TRAIN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<float> download() const {
    TRAIN_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<typename Element<T>::Bits> bits(count_);
    TRAIN_CUDA_CHECK(cudaMemcpy(bits.data(), data_, sizeof(T) * count_, cudaMemcpyDeviceToHost));
    std::vector<float> values(count_);
    for (std::size_t i = 0; i < count_; ++i) values[i] = Element<T>::decode(bits[i]);
    return values;
  }
  std::vector<unsigned char> raw() const {
    TRAIN_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> bytes(sizeof(T) * count_);
    TRAIN_CUDA_CHECK(cudaMemcpy(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost));
    return bytes;
  }
  // All bytes 0xFF: NaN for fp32 and bf16, -1 for int32. An output the op fails to write stays NaN.
  // Synchronous, so the poison cannot land after the op under test has written.
  void poison() {
    TRAIN_CUDA_CHECK(cudaMemset(data_, 0xFF, sizeof(T) * (count_ == 0 ? 1 : count_)));
    TRAIN_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  std::size_t count_ = 0;
  kernels::cuda::DeviceMemory memory_;
  T* data_ = nullptr;
};

// ---- random data ------------------------------------------------------------------------------------

class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}
  std::vector<float> uniform(std::size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(engine_);
    return v;
  }
  std::vector<float> normal(std::size_t n, float mean, float stddev) {
    std::normal_distribution<float> d(mean, stddev);
    std::vector<float> v(n);
    for (float& x : v) x = d(engine_);
    return v;
  }
  std::vector<std::int32_t> labels(std::size_t n, int classes) {
    std::uniform_int_distribution<int> d(0, classes - 1);
    std::vector<std::int32_t> v(n);
    for (auto& x : v) x = d(engine_);
    return v;
  }

 private:
  std::mt19937_64 engine_;
};

// ---- comparison ---------------------------------------------------------------------------------------

// max |gpu - ref| / (max |ref| + tiny). A NaN (or inf) in gpu where ref is finite (the poison surviving,
// or a real NaN) makes it +inf; sizes that differ too.
double relative_error(const std::vector<float>& gpu, const std::vector<float>& ref);
// Larger of two errors (several outputs of one op).
inline double worst(double a, double b) { return a > b ? a : b; }

// ---- timing -------------------------------------------------------------------------------------------

// Microseconds per call of launch() over `calls` back-to-back calls on stream, after one warm-up call.
double microseconds_per_call(cudaStream_t stream, const std::function<void()>& launch, int calls = 10);

// ---- the table ----------------------------------------------------------------------------------------

struct CheckResult {
  double error = 0.0;
  double microseconds = 0.0;  // per call; negative: not timed
  std::string note;           // printed after the verdict
};

class Report {
 public:
  // Runs check() and records a row; an exception is a failed row naming it.
  void run(const std::string& op, const std::string& shape, const std::string& dtype, double tolerance,
           const std::function<CheckResult()>& check);
  // A yes/no row (determinism, exactness).
  void record(const std::string& op, const std::string& shape, const std::string& dtype, bool passed,
              const std::string& note);
  void print_header() const;
  int failures() const { return failures_; }
  int rows() const { return rows_; }

 private:
  int failures_ = 0;
  int rows_ = 0;
};

// The tolerances, by how the op computes (see the README comment in gpu_kernel_check.cpp).
inline constexpr double kTolFp32Product = 1e-4;      // conv and GEMM: fp32 without TF32, other summation order
inline constexpr double kTolFp32Elementwise = 1e-5;  // BN, elementwise, pooling, loss, optimizer
inline constexpr double kTolBf16 = 2e-2;             // anything stored in bf16

// ---- one op's run ---------------------------------------------------------------------------------------

// The usual check of an op with one output: `out` poisoned (so a value the op fails to write stays NaN),
// call() once, its output (through `view`, e.g. to drop a misaligning offset) compared with `ref`, then
// call() timed on `stream`.
template <typename T, typename Call, typename View = std::identity>
CheckResult poisoned_run(DeviceBuffer<T>& out, const std::vector<float>& ref, cudaStream_t stream, const Call& call,
                         View view = {}) {
  out.poison();
  call();
  CheckResult r{relative_error(view(out.download()), ref)};
  r.microseconds = microseconds_per_call(stream, call);
  return r;
}

// Determinism: after poison(), call() again must write the very bytes it wrote into `outputs` the first
// time; when it does not, `r` says so and fails.
template <typename Poison, typename Call, typename... Buffers>
void check_same_bytes_again(CheckResult& r, const Poison& poison, const Call& call, const Buffers&... outputs) {
  const std::vector<std::vector<unsigned char>> first{outputs.raw()...};
  poison();
  call();
  const std::vector<std::vector<unsigned char>> again{outputs.raw()...};
  if (again != first) {
    r.note = "NOT bit-identical on a second run";
    r.error = std::nan("");
  }
}

// Whether a CUDA GPU is visible. Without one (or without a driver) there is nothing to check: says so for
// `program` on stderr, distinctly from a failure, and the program exits 2.
inline bool gpu_visible(const char* program) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status == cudaSuccess && devices > 0) return true;
  std::fprintf(stderr, "%s: no CUDA GPU visible (%s); nothing checked\n", program,
               status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
  return false;
}

// Shared by the check files.
struct Checks {
  kernels::cuda::Context& context;
  Report& report;
  Random& random;
};
void check_convolutions(Checks& c);
void check_batch_norm(Checks& c);
void check_elementwise_and_pooling(Checks& c);
void check_fully_connected_and_loss(Checks& c);
void check_optimizer(Checks& c);

}  // namespace train::gpu_check
