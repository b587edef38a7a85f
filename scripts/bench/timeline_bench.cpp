// timeline_bench: what the timeline costs the CPU engine's step, in CPU time (which other work on a shared
// machine barely disturbs, unlike wall time): the same engine alternates blocks of steps without and with
// its marks (the engine's StepRecorder, Engine::step_recorder), and prints the median CPU seconds per step of each. One process, one MPI
// rank, OMP_NUM_THREADS=1 for a clean figure. scripts/bench/timeline_bench.py runs it.
//   timeline_bench DEPTH BATCH SIZE STEPS_PER_BLOCK ROUNDS
#include "runtime/engine/cpu_engine.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

using namespace train;

namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    fmt::print(stderr, "usage: timeline_bench DEPTH BATCH SIZE STEPS_PER_BLOCK ROUNDS\n");
    return 64;
  }
  MPI_Init(&argc, &argv);
  TrainingSettings settings;
  settings.depth = std::atoi(argv[1]);
  settings.batch_per_rank = std::atoi(argv[2]);
  settings.height = settings.width = std::atoi(argv[3]);
  const int block = std::atoi(argv[4]), rounds = std::atoi(argv[5]);
  settings.timeline = StepRange{1, block};
  CpuEngine engine(settings, 10, RankIdentity{}, MPI_COMM_WORLD, std::chrono::seconds(60));
  engine.initialize(1);
  data::Batch batch;
  batch.size = settings.batch_per_rank;
  batch.height = batch.width = settings.height;
  batch.images.resize(static_cast<size_t>(batch.size) * batch.height * batch.width * 3);
  std::mt19937 generator(1);
  std::normal_distribution<float> normal;
  for (auto& value : batch.images) value = normal(generator);
  for (int i = 0; i < batch.size; ++i) batch.labels.push_back(static_cast<int32_t>(generator() % 10));
  engine.run_step(batch, 0.01);  // warm-up
  std::vector<double> off, on;
  size_t marks = 0;
  for (int round = 0; round < rounds; ++round) {
    for (const bool recording : {false, true}) {
      if (recording) engine.step_recorder().record_steps(block);
      const double start = cpu_seconds();
      for (int i = 0; i < block; ++i) engine.run_step(batch, 0.01);
      (recording ? on : off).push_back((cpu_seconds() - start) / block);
      if (recording) marks = engine.step_recorder().take_recorded_steps().marks.size();
    }
  }
  const double a = median(off), b = median(on);
  fmt::print("resnet{} batch {} {}x{}, {} rounds of {} steps: {:.3f} CPU ms per step without marks, {:.3f} with "
             "({:+.2f}%; {} marks per block)\n",
             settings.depth, settings.batch_per_rank, settings.height, settings.width, rounds, block, a * 1e3, b * 1e3,
             100 * (b / a - 1), marks);
  MPI_Finalize();
  return 0;
}
