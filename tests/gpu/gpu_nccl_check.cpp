// The NCCL gradient reducer on real GPUs: run under mpirun with one rank per GPU (one rank on a one-GPU
// machine still exercises the streams, events and buckets). Every rank fills a flat buffer shaped like
// ResNet-50's gradients with values that depend on its rank, reports the tensors ready in backward's
// order on the compute stream, and after finish() the buffer must hold the average over ranks on every
// rank, bit-identical across ranks, for fp32 and bf16 buffers and for several bucket thresholds.
//
//   mpirun -np <GPUs> gpu_nccl_check
// Exit 0 when every case passes, 1 on a miss, 2 when no GPU is visible.
#include "runtime/comm/gradient_reducer_nccl.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/comm/nccl_check.h"
#include "runtime/comm/nccl_communicator.h"
#include "runtime/model/resnet_spec.h"

#include <cuda_bf16.h>
#include <fmt/format.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace train;
using namespace train::gpu;

namespace {

// A value exactly representable in bf16 and whose average over ranks is exact in fp32, so that the
// comparison can demand equality: small integers divided by a power of two.
float value_of(int rank, size_t i) { return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 64) - 32) / 8.0f; }

template <typename T>
T to_element(float value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else {
    return __float2bfloat16(value);
  }
}

template <typename T>
float to_float(T value) {
  if constexpr (std::is_same_v<T, float>) {
    return value;
  } else {
    return __bfloat162float(value);
  }
}

template <typename T>
bool check_case(const NcclCommunicator& comm, const std::vector<size_t>& sizes, size_t threshold_bytes, int ranks) {
  const BucketPlan plan = plan_buckets(sizes, threshold_bytes, std::min<size_t>(threshold_bytes, 1 << 20), sizeof(float));
  std::vector<T> host(plan.total_elements);
  for (size_t i = 0; i < host.size(); ++i) host[i] = to_element<T>(value_of(comm.rank(), i));
  T* device = nullptr;
  cudaStream_t compute = nullptr;
  TRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  TRAIN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device), host.size() * sizeof(T)));
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, compute));
  bool ok = true;
  {
    NcclGradientReducer reducer(comm, plan, device, std::is_same_v<T, float> ? ncclFloat32 : ncclBfloat16, compute,
                                std::chrono::seconds(60));
    reducer.begin_step();
    for (int t = static_cast<int>(sizes.size()) - 1; t >= 0; --t) reducer.tensor_ready(t);  // backward's order
    reducer.finish();
    TRAIN_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, host.size() * sizeof(T), cudaMemcpyDeviceToHost, compute));
    TRAIN_CUDA_CHECK(cudaStreamSynchronize(compute));
    reducer.wait(std::chrono::seconds(60));
  }
  size_t wrong = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    double sum = 0;
    for (int r = 0; r < ranks; ++r) sum += value_of(r, i);
    const float expected = to_float(to_element<T>(static_cast<float>(sum / ranks)));
    if (to_float(host[i]) != expected) ++wrong;
  }
  // Bit-identical across ranks: every rank's checksum of the bytes equals rank 0's.
  uint64_t checksum = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(host.data());
  for (size_t i = 0; i < host.size() * sizeof(T); ++i) checksum = (checksum ^ bytes[i]) * 1099511628211ull;
  uint64_t lowest = checksum, highest = checksum;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &highest, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
  ok = wrong == 0 && lowest == highest;
  if (comm.rank() == 0) {
    std::printf("%-5s %-9s threshold %9zu B: %3zu buckets, %zu elements: %s%s\n",
                std::is_same_v<T, float> ? "fp32" : "bf16", ranks == 1 ? "1 rank" : fmt::format("{} ranks", ranks).c_str(),
                threshold_bytes, plan.buckets.size(), host.size(), ok ? "PASS" : "FAIL",
                ok ? "" : fmt::format(" ({} wrong elements on rank 0; ranks {})", wrong,
                                      lowest == highest ? "agree" : "differ").c_str());
  }
  cudaFree(device);
  cudaStreamDestroy(compute);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  set_error_rank(rank);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    if (rank == 0) std::fprintf(stderr, "gpu_nccl_check: no CUDA GPU visible; nothing checked\n");
    MPI_Finalize();
    return 2;
  }
  int failures = 0;
  try {
    TRAIN_CUDA_CHECK(cudaSetDevice(rank % devices));
    NcclCommunicator comm(MPI_COMM_WORLD, std::chrono::seconds(120));
    std::vector<size_t> sizes;
    for (const auto& tensor : build_resnet_spec(50, 1000).tensors) {
      if (tensor.is_parameter()) sizes.push_back(static_cast<size_t>(tensor.elements()));
    }
    for (size_t threshold : {size_t{4}, size_t{1} << 20, size_t{25} << 20, size_t{123457}, size_t{1} << 32}) {
      failures += check_case<float>(comm, sizes, threshold, size) ? 0 : 1;
      failures += check_case<__nv_bfloat16>(comm, sizes, threshold, size) ? 0 : 1;
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpu_nccl_check: rank %d: %s\n", rank, error.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("gpu_nccl_check: %s\n", failures == 0 ? "all cases passed" : "FAILURES");
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
