// tests/gpu/gpu_check_support.cpp: the metric, the timing and the table of gpu_kernel_check.

#include "tests/gpu/gpu_check_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>

namespace train::gpu_check {

double relative_error(const std::vector<float>& gpu, const std::vector<float>& ref) {
  if (gpu.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double max_diff = 0.0, max_ref = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double r = ref[i], g = gpu[i];
    if (std::isnan(r) && std::isnan(g)) continue;  // both NaN: agreement (NaN propagation checks)
    if (!std::isfinite(g) || !std::isfinite(r)) {
      if (g == r) continue;  // the same infinity
      return std::numeric_limits<double>::infinity();
    }
    max_diff = std::max(max_diff, std::fabs(g - r));
    max_ref = std::max(max_ref, std::fabs(r));
  }
  return max_diff / (max_ref + 1e-30);
}

double microseconds_per_call(cudaStream_t stream, const std::function<void()>& launch, int calls) {
  launch();  // warm-up: plans, workspace growth, first-touch
  cudaEvent_t start, stop;
  TRAIN_CUDA_CHECK(cudaEventCreate(&start));
  TRAIN_CUDA_CHECK(cudaEventCreate(&stop));
  TRAIN_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < calls; ++i) launch();
  TRAIN_CUDA_CHECK(cudaEventRecord(stop, stream));
  TRAIN_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  TRAIN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  TRAIN_CUDA_CHECK(cudaEventDestroy(start));
  TRAIN_CUDA_CHECK(cudaEventDestroy(stop));
  return 1000.0 * static_cast<double>(ms) / calls;
}

void Report::print_header() const {
  std::printf("%-34s %-36s %-5s %11s %9s %11s  %s\n", "op", "shape", "dtype", "max rel err", "tol", "us/call",
              "result");
  std::printf("%s\n", std::string(120, '-').c_str());
}

void Report::run(const std::string& op, const std::string& shape, const std::string& dtype, double tolerance,
                 const std::function<CheckResult()>& check) {
  CheckResult result;
  std::string failure;
  try {
    result = check();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  ++rows_;
  // Written as a negation so a NaN error fails.
  const bool passed = failure.empty() && !(result.error > tolerance) && !std::isnan(result.error);
  if (!passed) ++failures_;
  char time[32];
  if (result.microseconds >= 0.0 && failure.empty()) {
    std::snprintf(time, sizeof time, "%11.1f", result.microseconds);
  } else {
    std::snprintf(time, sizeof time, "%11s", "-");
  }
  std::printf("%-34s %-36s %-5s %11.3e %9.1e %s  %s%s%s\n", op.c_str(), shape.c_str(), dtype.c_str(), result.error,
              tolerance, time, passed ? "PASS" : "FAIL",
              failure.empty() ? (result.note.empty() ? "" : "  ") : "  error: ",
              failure.empty() ? result.note.c_str() : failure.c_str());
  std::fflush(stdout);
}

void Report::record(const std::string& op, const std::string& shape, const std::string& dtype, bool passed,
                    const std::string& note) {
  ++rows_;
  if (!passed) ++failures_;
  std::printf("%-34s %-36s %-5s %11s %9s %11s  %s  %s\n", op.c_str(), shape.c_str(), dtype.c_str(), "-", "-", "-",
              passed ? "PASS" : "FAIL", note.c_str());
  std::fflush(stdout);
}

}  // namespace train::gpu_check
