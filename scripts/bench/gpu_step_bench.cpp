// gpu_step_bench: training steps per second through the CUDA engine, as `train` runs them (the batch copied
// from pinned host memory on the copy stream, bf16 forward/backward, the bucketed NCCL reduction, the
// multi-tensor optimizer), on synthetic data. Run by scripts/bench/gpu_step_bench.py, which measures
// PyTorch beside it and prints the table.
//
//   gpu_step_bench [--depth 50] [--size 224] [--batches 64,128,256] [--steps 20] [--rounds 3]
//                  [--precision bfloat16|float32] [--classes 1000]
//
// Prints one JSON object per batch size: {"batch", "images_per_sec" (best round), "rounds" (every round's
// images/s), "ms_per_step", "device_bytes" (GPU memory the engine took: cudaMemGetInfo before and after),
// "gpu"}. A round is `steps` steps timed from the first enqueue to the end of the last step on the device.
// Exit 2 when no GPU is visible. Runs as one MPI rank (singleton or mpirun -np 1).
#include "common/train_variables.h"
#include "job/rank_environment.h"
#include "runtime/engine/cuda_engine.h"
#include "runtime/device_pinning.h"
#include "runtime/training_settings.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Options {
  int depth = 50, size = 224, steps = 20, rounds = 3, classes = 1000;
  std::vector<int> batches = {64, 128, 256};
  train::Precision precision = train::Precision::bfloat16;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i], value = argv[i + 1];
    if (name == "--depth") options.depth = std::atoi(value.c_str());
    else if (name == "--size") options.size = std::atoi(value.c_str());
    else if (name == "--steps") options.steps = std::atoi(value.c_str());
    else if (name == "--rounds") options.rounds = std::atoi(value.c_str());
    else if (name == "--classes") options.classes = std::atoi(value.c_str());
    else if (name == "--precision") {
      options.precision = value == "float32" ? train::Precision::float32 : train::Precision::bfloat16;
    } else if (name == "--batches") {
      options.batches.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');) options.batches.push_back(std::atoi(item.c_str()));
    } else {
      throw std::invalid_argument("unknown option " + name);
    }
  }
  return options;
}

size_t used_device_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  return total_bytes - free_bytes;
}

void bench(const Options& options, int batch, const std::string& gpu) {
  train::TrainingSettings settings;
  settings.depth = options.depth;
  settings.height = settings.width = options.size;
  settings.batch_per_rank = batch;
  settings.global_batch = batch;
  settings.device = train::Device::cuda;
  settings.precision = options.precision;
  settings.optimizer = train::Optimizer::sgd;
  settings.momentum = 0.9;
  settings.weight_decay = 1e-4;
  settings.shared_gradient_buffers = train::read_flag_variable(train::current_environment(), train::FlagVariable::shared_gradient_buffers);  // TRAIN_SHARED_GRADIENT_BUFFERS=1, as train reads it
  train::RankIdentity identity;  // rank 0 of 1
  const size_t before = used_device_bytes();
  auto engine = train::make_cuda_engine(settings, options.classes, identity, MPI_COMM_WORLD, std::chrono::minutes(10));
  engine->initialize(1);

  train::data::Batch data;  // pinned host memory (use_pinned_host_memory), as the loader fills it
  data.size = batch;
  data.height = data.width = options.size;
  data.images.resize(static_cast<size_t>(batch) * options.size * options.size * 3);
  data.labels.resize(static_cast<size_t>(batch));
  std::mt19937 generator(7);
  std::normal_distribution<float> normal;
  for (auto& value : data.images) value = normal(generator);
  for (auto& label : data.labels) label = static_cast<int32_t>(generator() % static_cast<unsigned>(options.classes));

  for (int i = 0; i < 5; ++i) engine->run_step(data, 0.1);  // warm-up: cuDNN plans, workspaces
  engine->take_totals();
  std::vector<double> rounds;
  for (int round = 0; round < options.rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int step = 0; step < options.steps; ++step) engine->run_step(data, 0.1);
    engine->take_totals();  // waits for the last step on the device
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rounds.push_back(batch * options.steps / seconds);
  }
  const size_t after = used_device_bytes();
  const double best = *std::max_element(rounds.begin(), rounds.end());
  fmt::print("{{\"batch\": {}, \"images_per_sec\": {:.1f}, \"rounds\": [{:.1f}], \"ms_per_step\": {:.2f}, "
             "\"device_bytes\": {}, \"precision\": \"{}\", \"fast_path\": {}, \"gpu\": \"{}\"}}\n",
             batch, best, fmt::join(rounds, ", "), 1000.0 * batch / best, after - before,
             train::precision_name(options.precision), settings.shared_gradient_buffers, gpu);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    fmt::print(stderr, "gpu_step_bench: no GPU visible\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    const Options options = parse(argc, argv);
    const std::string gpu = train::pin_gpu(0);
    train::use_pinned_host_memory();
    for (int batch : options.batches) bench(options, batch, gpu);
  } catch (const std::exception& error) {
    fmt::print(stderr, "gpu_step_bench: {}\n", error.what());
    code = 1;
  }
  MPI_Finalize();
  return code;
}
