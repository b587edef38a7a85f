// layer_bench: where a CPU training step spends its time. Runs every op of a ResNet's forward and
// backward pass on random data of the model's shapes, timing each op separately, and prints the CPU
// seconds per step by op kind and the slowest layers. It does not train (no optimizer, no real gradient
// flow) and runs the ops unfused (the model runs BN + ReLU and BN + add + ReLU as one op each), so its
// total is close to, not equal to, step_bench's. Run it with OMP_NUM_THREADS=1 for figures that other
// work on the machine hardly disturbs.
//   layer_bench DEPTH BATCH SIZE [REPEATS]
#include "kernels/ops.h"
#include "runtime/model/resnet_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace train;

namespace {

struct Shape {
  int n = 0, h = 0, w = 0, c = 0;
  std::int64_t size() const { return std::int64_t{n} * h * w * c; }
};

std::vector<float> random_values(std::int64_t count, std::mt19937& generator) {
  std::normal_distribution<float> normal;
  std::vector<float> values(static_cast<std::size_t>(count));
  for (auto& v : values) v = normal(generator);
  return values;
}

int repeats = 3;

// CPU seconds (all threads) per call of f, after one untimed call (first touch of fresh buffers is not
// the op's cost). CPU time rather than wall time: on a shared machine it does not count the time other
// processes hold the cores; with OMP_NUM_THREADS=1 it is the op's own work, with more it includes the
// threads' spinning at barriers.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
template <typename F>
double seconds_of(F&& f) {
  f();
  const double start = cpu_seconds();
  for (int r = 0; r < repeats; ++r) f();
  return (cpu_seconds() - start) / repeats;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    fmt::print(stderr, "usage: layer_bench DEPTH BATCH SIZE [REPEATS]\n");
    return 64;
  }
  const int depth = std::atoi(argv[1]), batch = std::atoi(argv[2]), size = std::atoi(argv[3]);
  if (argc == 5) repeats = std::atoi(argv[4]);
  const model::ResNetSpec spec = model::build_resnet_spec(depth, 1000);
  std::mt19937 generator(1);

  std::vector<Shape> shapes(static_cast<std::size_t>(spec.activation_count));
  shapes[0] = {batch, size, size, 3};
  std::vector<std::vector<float>> values(shapes.size()), gradients(shapes.size());
  values[0] = random_values(shapes[0].size(), generator);
  std::map<std::string, double> by_kind;               // "conv3x3/2 backward input" -> seconds per step
  std::vector<std::pair<double, std::string>> by_layer;  // seconds per step, "layer name kind"
  std::vector<std::int32_t> labels(static_cast<std::size_t>(batch), 0);

  auto record = [&](const model::LayerSpec& layer, const std::string& kind, double seconds) {
    by_kind[kind] += seconds;
    by_layer.emplace_back(seconds, layer.name + " " + kind);
  };
  // Times a layer's forward op, then its backward op, and records each under its kind.
  auto record_pass = [&](const model::LayerSpec& layer, const std::string& forward_kind, const auto& forward,
                         const std::string& backward_kind, const auto& backward) {
    const double forward_seconds = seconds_of(forward);
    const double backward_seconds = seconds_of(backward);
    record(layer, forward_kind, forward_seconds);
    record(layer, backward_kind, backward_seconds);
  };
  for (const model::LayerSpec& layer : spec.layers) {
    const Shape in = shapes[static_cast<std::size_t>(layer.input)];
    Shape out = in;
    const float* x = values[static_cast<std::size_t>(layer.input)].data();
    std::vector<float> dx(static_cast<std::size_t>(in.size()));
    switch (layer.kind) {
      case model::LayerKind::conv: {
        const auto s = kernels::Conv2dShape::square(in.n, in.h, in.w, in.c, layer.out_channels, layer.kernel,
                                                layer.stride, layer.padding);
        out = {in.n, s.out_h(), s.out_w(), layer.out_channels};
        const auto w = random_values(s.w_size(), generator);
        std::vector<float> y(static_cast<std::size_t>(out.size())), dw(w.size());
        const auto dy = random_values(out.size(), generator);
        double forward = 0, input = 0, weight = 0;
        {
          forward += seconds_of([&] { kernels::conv2d_forward(s, x, w.data(), y.data()); });
          if (layer.input != 0) {
            input += seconds_of([&] { kernels::conv2d_backward_input(s, dy.data(), w.data(), dx.data()); });
          }
          weight += seconds_of([&] { kernels::conv2d_backward_weight(s, x, dy.data(), dw.data()); });
        }
        const std::string geometry = fmt::format("conv{}x{}/{}", layer.kernel, layer.kernel, layer.stride);
        record(layer, geometry + " forward", forward);
        if (layer.input != 0) record(layer, geometry + " backward input", input);
        record(layer, geometry + " backward weight", weight);
        values[static_cast<std::size_t>(layer.output)] = std::move(y);
        break;
      }
      case model::LayerKind::batch_norm: {
        const std::int64_t rows = std::int64_t{in.n} * in.h * in.w;
        std::vector<float> gamma(static_cast<std::size_t>(in.c), 1.0f), beta(gamma.size(), 0.0f);
        std::vector<float> running_mean(gamma.size(), 0.0f), running_var(gamma.size(), 1.0f), mean(gamma.size()),
            invstd(gamma.size()), dgamma(gamma.size()), dbeta(gamma.size());
        std::vector<float> y(static_cast<std::size_t>(in.size()));
        const auto dy = random_values(in.size(), generator);
        record_pass(
            layer, "batch norm forward",
            [&] {
              kernels::batch_norm_forward_train(rows, in.c, x, gamma.data(), beta.data(), 1e-5f, 0.1f,
                                                running_mean.data(), running_var.data(), y.data(), mean.data(),
                                                invstd.data());
            },
            "batch norm backward",
            [&] {
              kernels::batch_norm_backward(rows, in.c, x, dy.data(), gamma.data(), mean.data(), invstd.data(),
                                           dx.data(), dgamma.data(), dbeta.data());
            });
        values[static_cast<std::size_t>(layer.output)] = std::move(y);
        break;
      }
      case model::LayerKind::relu: {
        std::vector<float> y(static_cast<std::size_t>(in.size()));
        const auto dy = random_values(in.size(), generator);
        record_pass(
            layer, "relu forward",
            [&] { kernels::relu_forward(in.size(), x, y.data()); },
            "relu backward",
            [&] { kernels::relu_backward(in.size(), y.data(), dy.data(), dx.data()); });
        values[static_cast<std::size_t>(layer.output)] = std::move(y);
        break;
      }
      case model::LayerKind::max_pool: {
        const kernels::Pool2dShape s{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding};
        out = {in.n, s.out_h(), s.out_w(), in.c};
        std::vector<float> y(static_cast<std::size_t>(out.size()));
        std::vector<std::int32_t> argmax(y.size());
        const auto dy = random_values(out.size(), generator);
        record_pass(
            layer, "max pool forward",
            [&] { kernels::max_pool_forward(s, x, y.data(), argmax.data()); },
            "max pool backward",
            [&] { kernels::max_pool_backward(s, dy.data(), argmax.data(), dx.data()); });
        values[static_cast<std::size_t>(layer.output)] = std::move(y);
        break;
      }
      case model::LayerKind::residual_add: {
        std::vector<float> y(static_cast<std::size_t>(in.size()));
        const float* b = values[static_cast<std::size_t>(layer.input_b)].data();
        record_pass(
            layer, "add forward",
            [&] { kernels::add(in.size(), x, b, y.data()); },
            // backward: the shortcut's gradient is copied and later summed with the branch's at the fork
            "add backward (copy + junction add)",
            [&] {
              std::copy(y.begin(), y.end(), dx.begin());
              kernels::add(in.size(), dx.data(), y.data(), dx.data());
            });
        values[static_cast<std::size_t>(layer.output)] = std::move(y);
        break;
      }
      case model::LayerKind::global_avg_pool: {
        out = {in.n, 1, 1, in.c};
        std::vector<float> y(static_cast<std::size_t>(out.size()));
        record_pass(
            layer, "avg pool forward",
            [&] { kernels::global_avg_pool_forward(in.n, in.h * in.w, in.c, x, y.data()); },
            "avg pool backward",
            [&] { kernels::global_avg_pool_backward(in.n, in.h * in.w, in.c, y.data(), dx.data()); });
        values[static_cast<std::size_t>(layer.output)] = std::move(y);
        break;
      }
      case model::LayerKind::fully_connected: {
        out = {in.n, 1, 1, layer.out_channels};
        const auto w = random_values(std::int64_t{layer.out_channels} * in.c, generator);
        std::vector<float> b(static_cast<std::size_t>(layer.out_channels), 0.0f);
        std::vector<float> y(static_cast<std::size_t>(out.size()));
        std::vector<float> dw(w.size()), db(b.size()), dy(y.size());
        record_pass(
            layer, "fc + loss forward",
            [&] {
              kernels::fully_connected_forward(in.n, in.c, layer.out_channels, x, w.data(), b.data(), y.data());
              kernels::softmax_cross_entropy(in.n, layer.out_channels, y.data(), labels.data(), 0.0f, dy.data());
            },
            "fc backward",
            [&] {
              kernels::fully_connected_backward(in.n, in.c, layer.out_channels, x, w.data(), dy.data(), dx.data(),
                                            dw.data(), db.data());
            });
        values[static_cast<std::size_t>(layer.output)] = std::move(y);
        break;
      }
    }
    shapes[static_cast<std::size_t>(layer.output)] = out;
  }

  double total = 0;
  for (const auto& [kind, seconds] : by_kind) total += seconds;
  fmt::print("resnet{} batch {} {}x{}: {:.3f} CPU s per step in ops ({:.2f} images per CPU s)\n", depth, batch, size,
             size, total, batch / total);
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto& [kind, seconds] : by_kind) kinds.emplace_back(seconds, kind);
  std::sort(kinds.rbegin(), kinds.rend());
  for (const auto& [seconds, kind] : kinds) {
    fmt::print("  {:8.2f} ms {:5.1f}%  {}\n", seconds * 1e3, 100 * seconds / total, kind);
  }
  std::sort(by_layer.rbegin(), by_layer.rend());
  fmt::print("slowest layers:\n");
  for (std::size_t i = 0; i < std::min<std::size_t>(15, by_layer.size()); ++i) {
    fmt::print("  {:8.2f} ms  {}\n", by_layer[i].first * 1e3, by_layer[i].second);
  }
  return 0;
}
