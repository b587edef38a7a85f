// distributed_check: run under mpirun with R ranks. Checks the CPU data-parallel step end to end:
//  1. after several steps with the bucketed MPI reduction, every rank holds bit-identical parameters;
//  2. at every step, the reduced gradient equals (to float rounding) a reference computed in one process
//     from the same parameters: the per-shard gradients of all R shards, averaged. (Compared step by step:
//     over several steps, rounding differences of the summation order grow chaotically through batch
//     norm over 4 images, so final parameters are compared across ranks and thresholds, bit for bit.)
//  3. bucket thresholds smaller than one tensor, larger than all, and of odd sizes give bit-identical
//     parameters.
// Prints one line per check and "N passed, M failed"; exits non-zero on any failure.
#include "kernels/ops.h"
#include "runtime/comm/gradient_reducer_mpi.h"
#include "runtime/model/cpu_resnet.h"

#include <fmt/format.h>
#include <mpi.h>

#include <cmath>
#include <optional>
#include <cstring>
#include <random>

using namespace train;

namespace {

constexpr int depth = 18, classes = 5, size = 16, batch = 4, steps = 4;
constexpr float smoothing = 0.1f;

struct Shard {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

Shard make_shard(int step, int shard) {
  std::mt19937 generator(static_cast<uint32_t>(1000 * step + shard));
  std::normal_distribution<float> normal;
  Shard data;
  data.images.resize(static_cast<size_t>(batch) * size * size * 3);
  for (auto& value : data.images) value = normal(generator);
  for (int i = 0; i < batch; ++i) data.labels.push_back(static_cast<int32_t>(generator() % classes));
  return data;
}

kernels::SgdOptions options() {
  kernels::SgdOptions result;
  result.lr = 0.05;
  result.momentum = 0.9;
  result.weight_decay = 1e-4;
  return result;
}

// The one-process reference: one model writing into a buffer of its own.
struct Reference {
  explicit Reference(const model::ResNetPlan& plan, size_t fusion_threshold_bytes)
      : gradients(plan.parameter_counts(), fusion_threshold_bytes), model(plan, gradients.views()) {}
  comm::GradientBuffer<float> gradients;
  model::CpuResNet<float> model;
};

// The average of every shard's gradient at the given parameters.
std::vector<double> reference_gradient(Reference& reference, const std::vector<float>& parameters, int step,
                                       int ranks) {
  reference.model.all_values() = parameters;
  std::vector<double> sum(reference.gradients.values().size(), 0.0);
  for (int shard = 0; shard < ranks; ++shard) {
    Shard data = make_shard(step, shard);
    reference.model.forward_and_loss(data.images.data(), data.labels.data(), batch, smoothing, 1.0f);
    reference.model.backward({}, {});
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += reference.gradients.values()[i];
  }
  for (auto& value : sum) value /= ranks;
  return sum;
}

// The distributed run: this rank's shard, bucketed MPI reduction. On rank 0 with `worst_error`, every
// step's reduced gradient is also compared with the one-process reference.
std::vector<float> distributed_parameters(int rank, int ranks, size_t fusion_threshold_bytes, double* worst_error) {
  const model::ResNetPlan plan = model::plan_resnet(model::build_resnet_spec(depth, classes), batch, size, size);
  comm::MpiGradientReducer reducer(MPI_COMM_WORLD, plan.parameter_counts(), fusion_threshold_bytes,
                                   std::chrono::seconds(120));
  model::CpuResNet<float> model(plan, reducer.gradients());
  model.initialize(42);
  std::optional<Reference> reference;
  if (worst_error != nullptr && rank == 0) reference.emplace(plan, fusion_threshold_bytes);
  for (int step = 0; step < steps; ++step) {
    Shard data = make_shard(step, rank);
    reducer.begin_step();
    model.forward_and_loss(data.images.data(), data.labels.data(), batch, smoothing, 1.0f / static_cast<float>(ranks));
    model.backward([&](int p) { reducer.tensor_ready(p); }, [&] { reducer.progress(); });
    reducer.finish();
    if (reference) {
      auto expected = reference_gradient(*reference, model.all_values(), step, ranks);
      double difference = 0, scale = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        difference += std::pow(reducer.gradients().values[i] - expected[i], 2);
        scale += expected[i] * expected[i];
      }
      *worst_error = std::max(*worst_error, std::sqrt(difference / scale));
    }
    model.sgd_step(options());
  }
  return model.all_values();
}

uint64_t checksum(const std::vector<float>& values) {
  uint64_t hash = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int passed = 0, failed = 0;
  auto report = [&](bool ok, const std::string& what) {
    if (rank == 0) fmt::print("{}: {}\n", ok ? "ok" : "FAIL", what);
    (ok ? passed : failed)++;
  };

  const std::vector<size_t> thresholds = {4, 1 << 20, size_t{1} << 32, 123457};
  std::vector<uint64_t> sums;
  double worst_error = 0;
  for (size_t threshold : thresholds) {
    auto parameters = distributed_parameters(rank, ranks, threshold, sums.empty() ? &worst_error : nullptr);
    uint64_t mine = checksum(parameters);
    std::vector<uint64_t> all(static_cast<size_t>(ranks));
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
    bool identical = std::all_of(all.begin(), all.end(), [&](uint64_t value) { return value == all[0]; });
    report(identical, fmt::format("{} ranks hold bit-identical parameters after {} steps (bucket threshold {} bytes)",
                                  ranks, steps, threshold));
    sums.push_back(mine);
  }
  bool same_for_all_thresholds = std::all_of(sums.begin(), sums.end(), [&](uint64_t value) { return value == sums[0]; });
  report(same_for_all_thresholds, "bucket thresholds smaller than a tensor, larger than all, and odd give the same "
                                  "parameters bit for bit");
  MPI_Bcast(&worst_error, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  report(worst_error < 1e-6, fmt::format("every step's reduced gradient equals the one-process average of the {} "
                                         "per-shard gradients (worst relative L2 difference {:.2e}, tolerance 1e-6)",
                                         ranks, worst_error));
  if (rank == 0) fmt::print("{} passed, {} failed\n", passed, failed);
  MPI_Finalize();
  return failed == 0 ? 0 : 1;
}
