// The NCCL gradient reducer on real GPUs, as the CUDA engine uses it: every rank holds a gradient buffer
// shaped like ResNet-50's (aligned tensors, the engine's bucket plan) with values that depend on its rank,
// reports the tensors ready in backward's order on the compute stream, and after finish() the fp32 buffer
// must hold the fp32 mean over ranks (to within fp32 rounding of NCCL's fp32 1/n pre-multiplication; exactly
// when the number of ranks is a power of two), bit-identical on every rank, for several bucket thresholds:
//   fp32            the fp32 mode: backward writes the fp32 buffer that is reduced;
//   bf16 widened    training: backward writes bf16, each bucket is widened to fp32 just before its
//                   reduction (the reducer's prepare hook, as runtime/engine/cuda_engine.cpp sets it).
//
//   mpirun -np <ranks> gpu_nccl_check
// Ranks go to GPUs round-robin. Where a host has fewer GPUs than ranks (a check on a one-GPU machine), each
// rank gets an NCCL_HOSTID of its own before NCCL starts, so that NCCL takes it for a host of its own (NCCL
// refuses two ranks on one GPU of one host) and its traffic goes over the socket transport, the path of
// multi-host jobs without EFA. Exit 0 when every case passes, 1 on a miss, 2 when no GPU is visible.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/ops_cuda.h"
#include "runtime/comm/gradient_buckets.h"
#include "runtime/comm/gradient_reducer_nccl.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/comm/nccl_check.h"
#include "runtime/comm/nccl_communicator.h"
#include "runtime/model/resnet_spec.h"

#include <cuda_bf16.h>
#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace train;
using namespace train::comm;

namespace {

// Values exactly representable in bf16 (small multiples of 1/8), different on every rank.
float value_of(int rank, size_t i) { return static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 64) - 32) / 8.0f; }

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

bool check_case(const NcclCommunicator& comm, kernels::cuda::Context& context, const std::vector<size_t>& sizes,
                size_t threshold_bytes, bool widened) {
  const int ranks = comm.size();
  cudaStream_t compute = context.stream();
  // As the CUDA engine: a communication stream of the highest priority, the two events that order it, and
  // the memory of the reducer's fp32 buffer (what is reduced).
  const kernels::cuda::Stream communication = kernels::cuda::make_stream(kernels::cuda::StreamPriority::highest);
  const kernels::cuda::Event ready = kernels::cuda::make_event(), done = kernels::cuda::make_event();
  kernels::cuda::DeviceMemory reduced_memory, written_memory;
  float* reduced = nullptr;
  __nv_bfloat16* written = nullptr;  // bf16, what backward writes (bf16 case only)
  NcclGradientReducer::Prepare prepare;
  if (widened) {
    prepare = [&](size_t begin, size_t end) {
      kernels::cuda::cast<__nv_bfloat16, float>(context, static_cast<std::int64_t>(end - begin), written + begin,
                                                reduced + begin);
    };
  }
  NcclGradientReducer reducer(comm, sizes, threshold_bytes,
                              NcclGradientReducer::Device{compute, communication.get(), ready.get(), done.get(),
                                                          [&](size_t bytes) {
                                                            reduced_memory = kernels::cuda::allocate_device(bytes);
                                                            return reduced_memory.get();
                                                          }},
                              std::chrono::seconds(60), ncclAvg, prepare);
  const BucketPlan& plan = reducer.plan();
  reduced = reducer.gradients().values;
  std::vector<bool> padding(plan.total_elements, true);
  for (size_t t = 0; t < sizes.size(); ++t) {
    std::fill_n(padding.begin() + static_cast<std::ptrdiff_t>(plan.offset_of_tensor[t]), sizes[t], false);
  }
  std::vector<float> host(plan.total_elements, 0.0f);
  for (size_t i = 0; i < host.size(); ++i) host[i] = padding[i] ? 0.0f : value_of(comm.rank(), i);
  if (widened) {
    std::vector<__nv_bfloat16> bf16(host.size());
    for (size_t i = 0; i < host.size(); ++i) bf16[i] = __float2bfloat16(host[i]);
    written_memory = kernels::cuda::allocate_device(bf16.size() * sizeof(__nv_bfloat16));
    written = kernels::cuda::as<__nv_bfloat16>(written_memory);
    TRAIN_CUDA_CHECK(cudaMemcpyAsync(written, bf16.data(), bf16.size() * sizeof(__nv_bfloat16),
                                     cudaMemcpyHostToDevice, compute));
    // Poison: only the widening may fill the fp32 buffer (padding excepted: the model zeroes it once).
    std::vector<float> poison(host.size(), std::nanf(""));
    for (size_t i = 0; i < host.size(); ++i) {
      if (padding[i]) poison[i] = 0.0f;
    }
    TRAIN_CUDA_CHECK(cudaMemcpyAsync(reduced, poison.data(), poison.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, compute));
  } else {
    TRAIN_CUDA_CHECK(cudaMemcpyAsync(reduced, host.data(), host.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, compute));
  }
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(compute));  // the host vectors above go away
  reducer.begin_step();
  for (int t = static_cast<int>(sizes.size()) - 1; t >= 0; --t) reducer.tensor_ready(t);  // backward's order
  reducer.finish();
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(host.data(), reduced, host.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                   compute));
  reducer.wait(std::chrono::seconds(60));
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(compute));
  // The fp32 mean: exact for a power of two ranks (1/n exact, sums of multiples of 1/8 exact); otherwise
  // NCCL multiplies each rank's value by fp32(1/n) and sums in fp32: within (n + 1) fp32 roundings of the
  // largest contribution.
  size_t wrong = 0;
  double worst = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    double sum = 0, largest = 0;
    for (int r = 0; r < ranks; ++r) {
      const double v = padding[i] ? 0.0 : value_of(r, i);
      sum += v;
      largest = std::max(largest, std::fabs(v));
    }
    const double mean = sum / ranks;
    const double bound = power_of_two(ranks) ? 0.0 : (ranks + 1) * std::ldexp(largest, -23);
    const double error = std::fabs(static_cast<double>(host[i]) - mean);
    if (!(error <= bound)) ++wrong;
    if (std::isfinite(error)) worst = std::max(worst, error);
  }
  // Bit-identical across ranks: every rank's checksum of the bytes equals rank 0's.
  uint64_t checksum = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(host.data());
  for (size_t i = 0; i < host.size() * sizeof(float); ++i) checksum = (checksum ^ bytes[i]) * 1099511628211ull;
  uint64_t lowest = checksum, highest = checksum;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &highest, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
  const bool ok = wrong == 0 && lowest == highest;
  if (comm.rank() == 0) {
    std::printf("%-13s %d rank%s threshold %11zu B: %3zu buckets, %zu elements, worst |error| %.2e: %s%s\n",
                widened ? "bf16 widened" : "fp32", ranks, ranks == 1 ? " " : "s", threshold_bytes, plan.buckets.size(),
                host.size(), worst, ok ? "PASS" : "FAIL",
                ok ? "" : fmt::format(" ({} wrong elements on rank 0; ranks {})", wrong,
                                      lowest == highest ? "agree" : "differ").c_str());
  }
  return ok;
}

// Ranks beyond the host's GPUs share them; NCCL then needs each to look like a host of its own.
void give_each_rank_a_host_id(int rank, int devices) {
  MPI_Comm host;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host));
  int local_size = 1;
  MPI_CHECK(MPI_Comm_size(host, &local_size));
  MPI_CHECK(MPI_Comm_free(&host));
  if (local_size <= devices) return;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  const std::string id = fmt::format("{}-gpu-check-rank-{}", name, rank);
  setenv("NCCL_HOSTID", id.c_str(), 1);
  if (rank == 0) {
    std::printf("%d ranks share %d GPU%s on this host: each rank has its own NCCL_HOSTID (socket transport)\n",
                local_size, devices, devices == 1 ? "" : "s");
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  set_error_rank(rank);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    if (rank == 0) std::fprintf(stderr, "gpu_nccl_check: no CUDA GPU visible; nothing checked\n");
    MPI_Finalize();
    return 2;
  }
  int failures = 0;
  try {
    give_each_rank_a_host_id(rank, devices);
    TRAIN_CUDA_CHECK(cudaSetDevice(rank % devices));
    const kernels::cuda::Stream stream = kernels::cuda::make_stream();
    {
      kernels::cuda::Context context(stream.get());
      NcclCommunicator comm(MPI_COMM_WORLD, std::chrono::seconds(120));
      std::vector<size_t> sizes;
      for (const auto& tensor : model::build_resnet_spec(50, 37).tensors) {  // 37 classes: unaligned if packed
        if (tensor.is_parameter()) sizes.push_back(static_cast<size_t>(tensor.elements()));
      }
      for (size_t threshold : {size_t{4}, size_t{1} << 20, size_t{25} << 20, size_t{123457}, size_t{1} << 32}) {
        failures += check_case(comm, context, sizes, threshold, /*widened=*/false) ? 0 : 1;
        failures += check_case(comm, context, sizes, threshold, /*widened=*/true) ? 0 : 1;
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpu_nccl_check: rank %d: %s\n", rank, error.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("gpu_nccl_check: %s\n", failures == 0 ? "all cases passed" : "FAILURES");
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
