// allreduce_bench (under mpirun): summing ResNet-50's gradients (25,557,032 floats in 161 tensors)
// across the ranks three ways: our buckets (non-blocking allreduce per bucket of fusion_threshold bytes),
// one allreduce of everything in one buffer (the ceiling), one allreduce per tensor (naive code).
// Prints time and bus bandwidth (2 (R-1)/R bytes / time, NCCL's convention) on rank 0.
//   mpirun -np 4 allreduce_bench [THRESHOLD_MB] [REPEATS]
#include "runtime/comm/gradient_buckets.h"
#include "runtime/model/resnet_spec.h"

#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <vector>

using namespace train;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const double threshold_mb = argc > 1 ? std::atof(argv[1]) : 25.0;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  auto spec = model::build_resnet_spec(50, 1000);
  std::vector<size_t> sizes;
  for (const auto& tensor : spec.tensors) {
    if (tensor.is_parameter()) sizes.push_back(static_cast<size_t>(tensor.elements()));
  }
  auto plan = comm::plan_buckets(sizes, static_cast<size_t>(threshold_mb * 1024 * 1024), 1 << 20, sizeof(float));
  std::vector<float> gradients(plan.total_elements, 1.0f);
  const double bytes = static_cast<double>(plan.total_elements) * sizeof(float);

  auto time_it = [&](const char* name, auto&& body) {
    body();  // warm-up
    MPI_Barrier(MPI_COMM_WORLD);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) body();
    MPI_Barrier(MPI_COMM_WORLD);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repeats;
    if (rank == 0) {
      fmt::print("{:<34} {:8.1f} ms   bus bandwidth {:6.2f} GB/s\n", name, seconds * 1e3,
                 bytes * 2.0 * (ranks - 1) / ranks / seconds / 1e9);
    }
  };
  if (rank == 0) {
    fmt::print("ResNet-50 gradients: {:.1f} MB in {} tensors, {} ranks, {} buckets of {} MB\n", bytes / 1e6,
               sizes.size(), ranks, plan.buckets.size(), threshold_mb);
  }
  time_it("one buffer (ceiling)", [&] {
    MPI_Allreduce(MPI_IN_PLACE, gradients.data(), static_cast<int>(gradients.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  time_it("buckets (non-blocking, in flight)", [&] {
    std::vector<MPI_Request> requests;
    for (const auto& bucket : plan.buckets) {
      requests.emplace_back();
      MPI_Iallreduce(MPI_IN_PLACE, gradients.data() + bucket.begin, static_cast<int>(bucket.end - bucket.begin),
                     MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &requests.back());
    }
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  });
  time_it("one call per tensor (naive)", [&] {
    for (size_t p = 0; p < sizes.size(); ++p) {
      MPI_Allreduce(MPI_IN_PLACE, gradients.data() + plan.offset_of_tensor[p], static_cast<int>(sizes[p]), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
    }
  });
  MPI_Finalize();
  return 0;
}
