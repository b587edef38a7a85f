// tests/gpu/check_optimizer.cpp: the multi-tensor optimizer step over ResNet-50's 161 parameter tensors
// (25,557,032 values in one flat buffer, as the runtime keeps them) against the CPU reference: SGD with
// momentum, Nesterov, LARS, plain SGD without momentum buffers; fp32 gradients (the reduced average, as the
// engines hand them over) with an fp32 or a bf16 weight copy (the bf16 run checks the copy too). Plus run-to-run
// bit-identity of a LARS step.

#include "kernels/ops.h"
#include "tests/gpu/gpu_check_support.h"

#include <cmath>
#include <string>
#include <type_traits>

namespace train::gpu_check {
namespace {

struct Parameter {
  std::int64_t count;
  bool weight_decay;
};

// torchvision's resnet50(): conv1, bn1, four layers of bottlenecks (1x1, 3x3, 1x1 convs with BN; a 1x1
// downsample + BN on the first block of each layer), fc. 161 tensors.
std::vector<Parameter> resnet50_parameters() {
  std::vector<Parameter> p;
  auto conv = [&](std::int64_t out, std::int64_t in, std::int64_t k) { p.push_back({out * in * k * k, true}); };
  auto bn = [&](std::int64_t c) {
    p.push_back({c, false});
    p.push_back({c, false});
  };
  conv(64, 3, 7);
  bn(64);
  const std::int64_t widths[] = {64, 128, 256, 512};
  const int blocks[] = {3, 4, 6, 3};
  std::int64_t in = 64;
  for (int layer = 0; layer < 4; ++layer) {
    const std::int64_t width = widths[layer], out = 4 * width;
    for (int block = 0; block < blocks[layer]; ++block) {
      conv(width, in, 1);
      bn(width);
      conv(width, width, 3);
      bn(width);
      conv(out, width, 1);
      bn(out);
      if (block == 0) {
        conv(out, in, 1);
        bn(out);
      }
      in = out;
    }
  }
  p.push_back({1000 * 2048, true});  // fc.weight
  p.push_back({1000, false});        // fc.bias
  return p;
}

template <typename G>
void check_step(Checks& c, const std::string& name, const kernels::SgdOptions& options, bool with_buffers) {
  const auto params = resnet50_parameters();
  std::int64_t total = 0;
  for (const auto& p : params) total += p.count;
  const std::string shape = name + " " + std::to_string(params.size()) + " tensors, " + std::to_string(total);
  const char* dtype = Element<G>::name;
  const std::size_t tn = static_cast<std::size_t>(total);

  const auto param0 = c.random.normal(tn, 0.0f, 0.1f);
  const auto grad = representable<G>(c.random.normal(tn, 0.0f, 0.01f));
  const auto momentum0 = c.random.normal(tn, 0.0f, 0.01f);  // as after a first step

  // CPU reference.
  std::vector<float> param_ref = param0, momentum_ref = momentum0;
  std::vector<kernels::SgdTensor<float>> cpu_tensors;
  std::int64_t offset = 0;
  for (const auto& p : params) {
    cpu_tensors.push_back({param_ref.data() + offset, grad.data() + offset,
                           with_buffers ? momentum_ref.data() + offset : nullptr, p.count, p.weight_decay});
    offset += p.count;
  }
  std::vector<double> trust_ref;
  for (const auto& t : cpu_tensors) trust_ref.push_back(kernels::lars_trust_ratio<float>(t, options));
  kernels::sgd_step<float>(cpu_tensors, options);

  // GPU: flat buffers, tensors pointing into them.
  DeviceBuffer<float> d_param(tn, param0), d_momentum(tn, momentum0);
  DeviceBuffer<float> d_grad(tn, grad);
  DeviceBuffer<G> d_copy(tn);
  std::vector<kernels::cuda::SgdTensor<G>> gpu_tensors;
  offset = 0;
  for (const auto& p : params) {
    gpu_tensors.push_back({d_param.get() + offset, d_grad.get() + offset,
                           with_buffers ? d_momentum.get() + offset : nullptr, d_copy.get() + offset, p.count,
                           p.weight_decay});
    offset += p.count;
  }
  auto reset = [&] {
    d_param.upload(param0);
    d_momentum.upload(momentum0);
    d_copy.poison();
  };

  const double tol = kTolFp32Elementwise;
  c.report.run("sgd_step", shape, dtype, std::is_same_v<G, float> ? tol : kTolBf16, [&] {
    kernels::cuda::SgdTensorTable<G> table(c.context, gpu_tensors);
    reset();
    kernels::cuda::sgd_step<G>(c.context, table, options);
    const auto param_gpu = d_param.download();
    // The update itself (after - before) is compared, not the weights: relative to |w| any update looks
    // small.
    std::vector<float> delta_gpu(tn), delta_ref(tn);
    for (std::size_t i = 0; i < tn; ++i) {
      delta_gpu[i] = param_gpu[i] - param0[i];
      delta_ref[i] = param_ref[i] - param0[i];
    }
    double fp32_error = relative_error(delta_gpu, delta_ref);
    if (with_buffers && options.momentum != 0.0) {
      fp32_error = worst(fp32_error, relative_error(d_momentum.download(), momentum_ref));
    }
    if (options.lars) {
      TRAIN_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> trust(params.size());
      TRAIN_CUDA_CHECK(cudaMemcpy(trust.data(), table.trust_ratios(), sizeof(float) * trust.size(),
                                  cudaMemcpyDeviceToHost));
      fp32_error = worst(fp32_error, relative_error(trust, std::vector<float>(trust_ref.begin(), trust_ref.end())));
    }
    CheckResult r;
    // fp32 state (master weights, momentum, trust ratios) is held to the fp32 bar whatever G is; the
    // bf16 copy of the weights to the bf16 bar.
    r.error = fp32_error;
    if (std::is_same_v<G, bf16>) {
      const double copy_error = relative_error(d_copy.download(), representable<bf16>(param_ref));
      if (fp32_error > tol) {
        r.note = "fp32 state off: " + std::to_string(fp32_error);
        r.error = std::nan("");
      } else {
        r.error = copy_error;
        r.note = "fp32 state rel err " + std::to_string(fp32_error) + "; error column: bf16 weight copy";
      }
    }
    // Determinism (LARS, the reductions): the same step again from the same state, the same bytes.
    const auto step = [&] { kernels::cuda::sgd_step<G>(c.context, table, options); };
    check_same_bytes_again(r, reset, step, d_param, d_momentum, d_copy);
    r.microseconds = microseconds_per_call(c.context.stream(), step);
    return r;
  });
}

template <typename G>
void check_all(Checks& c) {
  kernels::SgdOptions sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-4;
  check_step<G>(c, "momentum", sgd, true);

  kernels::SgdOptions nesterov = sgd;
  nesterov.nesterov = true;
  check_step<G>(c, "nesterov", nesterov, true);

  kernels::SgdOptions lars = sgd;
  lars.lr = 2.0;
  lars.weight_decay = 5e-5;
  lars.lars = true;
  lars.lars_eta = 0.001;
  lars.lars_epsilon = 1e-8;
  check_step<G>(c, "lars", lars, true);

  kernels::SgdOptions plain;
  plain.lr = 0.05;
  plain.momentum = 0.0;
  plain.weight_decay = 1e-4;
  check_step<G>(c, "no momentum, no buffers", plain, false);
}

}  // namespace

void check_optimizer(Checks& c) {
  const auto params = resnet50_parameters();
  std::int64_t total = 0;
  for (const auto& p : params) total += p.count;
  c.report.record("resnet50 parameter list", std::to_string(params.size()) + " tensors, " + std::to_string(total),
                  "-", params.size() == 161 && total == 25557032, "expected 161 tensors, 25557032 values");
  check_all<float>(c);
  check_all<bf16>(c);
}

}  // namespace train::gpu_check
