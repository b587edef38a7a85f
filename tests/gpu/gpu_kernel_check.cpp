// tests/gpu/gpu_kernel_check.cpp: every CUDA op of kernels/cuda/ops_cuda.h against its CPU reference
// (kernels/cpu, the specification), on a GPU.
//
//   gpu_kernel_check [--seed N] [--only conv|bn|elementwise|fc|optimizer]
//
// For every op: seeded random inputs (in bf16 runs, rounded to bf16 before the CPU sees them, so both
// sides compute from the same values), device outputs poisoned with NaN bytes before the call, the CUDA
// op and the CPU op in fp32 on several shapes, ResNet-50's own among them. A row per check:
//   op, shape, dtype, max relative error = max |gpu - cpu| / (max |cpu| + tiny), tolerance, time per call
//   (cudaEvent, 10 calls after a warm-up), PASS/FAIL.
// Tolerances:
//   fp32 convolutions and matrix products   1e-4  (no TF32; cuDNN/cuBLAS sum in another order)
//   fp32 everything else                    1e-5  (BN statistics, gradients, loss and optimizer state are
//                                                  fp32 in bf16 runs too and are held to this as well)
//   bf16 outputs                            2e-2  (one bf16 rounding is 2^-9 relative; sums of many)
// A surviving NaN poison (an output element never written) is an infinite error. Determinism: BN forward
// and backward, conv weight gradient, FC backward and the optimizer run twice and must give the same
// bytes.
//
// Exit status: 0 all passed, 1 some check failed, 2 no GPU visible (CI builds this but cannot run it).

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops_cuda.h"
#include "tests/gpu/gpu_check_support.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

namespace {

int usage(const char* program) {
  std::fprintf(stderr, "usage: %s [--seed N] [--only conv|bn|elementwise|fc|optimizer]\n", program);
  return 64;
}

int run(std::uint64_t seed, const std::string& only) {
  using namespace train::gpu_check;
  int device = 0;
  TRAIN_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  TRAIN_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  std::printf("gpu_kernel_check: device %d: %s (sm_%d%d, %d SMs, %.1f GiB), seed %llu\n", device, properties.name,
              properties.major, properties.minor, properties.multiProcessorCount,
              static_cast<double>(properties.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
              static_cast<unsigned long long>(seed));
  // The fp32 checks must not see TF32 anywhere; this also covers any library default we do not set.
  setenv("NVIDIA_TF32_OVERRIDE", "0", 0);

  // A blocking stream: it orders itself after the default-stream copies and memsets of the test harness
  // (which also synchronise the device themselves).
  cudaStream_t stream = nullptr;
  TRAIN_CUDA_CHECK(cudaStreamCreate(&stream));
  int failures = 0, rows = 0;
  {
    train::kernels::cuda::Context context(stream);
    Report report;
    Random random(seed);
    Checks checks{context, report, random};
    report.print_header();
    if (only.empty() || only == "conv") check_convolutions(checks);
    if (only.empty() || only == "bn") check_batch_norm(checks);
    if (only.empty() || only == "elementwise") check_elementwise_and_pooling(checks);
    if (only.empty() || only == "fc") check_fully_connected_and_loss(checks);
    if (only.empty() || only == "optimizer") check_optimizer(checks);
    TRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
    failures = report.failures();
    rows = report.rows();
  }
  TRAIN_CUDA_CHECK(cudaStreamDestroy(stream));
  if (rows == 0) {
    std::fprintf(stderr, "gpu_kernel_check: nothing selected by --only %s\n", only.c_str());
    return 64;
  }
  std::printf("\ngpu_kernel_check: %d of %d checks passed%s\n", rows - failures, rows,
              failures == 0 ? "" : " -- FAILURES above");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 20240605;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      return usage(argv[0]);
    }
  }
  if (!train::gpu_check::gpu_visible("gpu_kernel_check")) return 2;
  try {
    return run(seed, only);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_kernel_check: %s\n", e.what());
    return 1;
  }
}
