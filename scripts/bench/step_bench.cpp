// step_bench: images/s of train's CPU training step (forward, loss, backward, SGD update) for one rank,
// on random data. scripts/bench/cpu_step_bench.py runs it next to PyTorch on the same shapes.
//   step_bench DEPTH BATCH SIZE STEPS
#include "kernels/ops.h"
#include "runtime/model/cpu_resnet.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <cstdlib>
#include <random>

using namespace train;

int main(int argc, char** argv) {
  if (argc != 5) {
    fmt::print(stderr, "usage: step_bench DEPTH BATCH SIZE STEPS\n");
    return 64;
  }
  const int depth = std::atoi(argv[1]), batch = std::atoi(argv[2]), size = std::atoi(argv[3]), steps = std::atoi(argv[4]);
  const int classes = 1000;
  model::ResNetPlan plan = model::plan_resnet(model::build_resnet_spec(depth, classes), batch, size, size);
  comm::GradientBuffer<float> gradients(plan.parameter_counts(), size_t{25} << 20);
  model::CpuResNet<float> model(std::move(plan), gradients.views());
  model.initialize(1);
  std::mt19937 generator(1);
  std::normal_distribution<float> normal;
  std::vector<float> images(static_cast<size_t>(batch) * size * size * 3);
  for (auto& value : images) value = normal(generator);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (auto& label : labels) label = static_cast<int32_t>(generator() % classes);
  kernels::SgdOptions options;
  options.lr = 0.01;
  options.weight_decay = 1e-4;
  auto step = [&] {
    model.forward_and_loss(images.data(), labels.data(), batch, 0.0f, 1.0f);
    model.backward({}, {});
    model.sgd_step(options);
  };
  // CPU time of all threads next to wall time: on a machine shared with other work, wall time counts the
  // time others hold the cores; with OMP_NUM_THREADS=1 the CPU time is this program's own work.
  auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  step();  // warm-up: buffers, workspaces
  auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_seconds();
  for (int i = 0; i < steps; ++i) step();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = cpu_seconds() - cpu_start;
  fmt::print("train resnet{} batch {} {}x{}: {:.2f} images/s ({:.3f} s/step, {:.3f} CPU s/step)\n", depth, batch,
             size, size, batch * steps / seconds, seconds / steps, cpu / steps);
  return 0;
}
