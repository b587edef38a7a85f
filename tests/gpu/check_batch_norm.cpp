// tests/gpu/check_batch_norm.cpp: every batch-norm variant against the CPU reference (outputs, saved and
// running statistics, gradients), plus run-to-run bit-identity of the training forward and backward.

#include "kernels/ops.h"
#include "tests/gpu/gpu_check_support.h"

#include <cmath>
#include <string>
#include <type_traits>

namespace train::gpu_check {
namespace {

enum class Variant { plain, relu, add_relu };

const char* forward_name(Variant v) {
  switch (v) {
    case Variant::plain: return "batch_norm_forward_train";
    case Variant::relu: return "batch_norm_relu_forward_train";
    case Variant::add_relu: return "batch_norm_relu_forward_train+add";
  }
  return "";
}

template <typename T>
void check_shape(Checks& c, const std::string& name, std::int64_t rows, int channels) {
  const std::string shape = name + " " + std::to_string(rows) + "x" + std::to_string(channels);
  const char* dtype = Element<T>::name;
  const double tol = std::is_same_v<T, float> ? kTolFp32Elementwise : kTolBf16;
  const std::size_t count = static_cast<std::size_t>(rows) * channels, cn = static_cast<std::size_t>(channels);
  const float eps = 1e-5f, momentum = 0.1f;
  // A mean away from zero and a spread unlike 1, so centring and scaling both matter.
  const auto x = representable<T>(c.random.normal(count, 0.5f, 2.0f));
  const auto shortcut = representable<T>(c.random.normal(count, 0.0f, 1.0f));
  const auto dy = representable<T>(c.random.normal(count, 0.0f, 1.0f));
  const auto gamma = c.random.uniform(cn, 0.5f, 1.5f);
  const auto beta = c.random.uniform(cn, -0.5f, 0.5f);
  const auto running_mean0 = c.random.normal(cn, 0.0f, 0.1f);
  const auto running_var0 = c.random.uniform(cn, 0.5f, 1.5f);
  DeviceBuffer<T> d_x(count, x), d_shortcut(count, shortcut), d_dy(count, dy);
  DeviceBuffer<float> d_gamma(cn, gamma), d_beta(cn, beta);
  cudaStream_t stream = c.context.stream();

  // The CPU forward of each variant also provides the saved statistics and y for the backward checks.
  std::vector<float> save_mean(cn), save_invstd(cn), y_relu(count);
  for (Variant v : {Variant::plain, Variant::relu, Variant::add_relu}) {
    std::vector<float> y_ref(count), mean_ref(cn), invstd_ref(cn), rm_ref = running_mean0, rv_ref = running_var0;
    const float* sc = v == Variant::add_relu ? shortcut.data() : nullptr;
    if (v == Variant::plain) {
      kernels::batch_norm_forward_train<float>(rows, channels, x.data(), gamma.data(), beta.data(), eps, momentum,
                                           rm_ref.data(), rv_ref.data(), y_ref.data(), mean_ref.data(),
                                           invstd_ref.data());
      save_mean = mean_ref;
      save_invstd = invstd_ref;
    } else {
      kernels::batch_norm_relu_forward_train<float>(rows, channels, x.data(), sc, gamma.data(), beta.data(), eps,
                                                momentum, rm_ref.data(), rv_ref.data(), y_ref.data(), mean_ref.data(),
                                                invstd_ref.data());
      if (v == Variant::relu) y_relu = y_ref;
    }
    DeviceBuffer<T> y(count);
    DeviceBuffer<float> mean(cn), invstd(cn), rm(cn, running_mean0), rv(cn, running_var0);
    y.poison();
    mean.poison();
    invstd.poison();
    auto call = [&] {
      if (v == Variant::plain) {
        kernels::cuda::batch_norm_forward_train<T>(c.context, rows, channels, d_x.get(), d_gamma.get(), d_beta.get(),
                                                   eps, momentum, rm.get(), rv.get(), y.get(), mean.get(),
                                                   invstd.get());
      } else {
        kernels::cuda::batch_norm_relu_forward_train<T>(c.context, rows, channels, d_x.get(),
                                                    v == Variant::add_relu ? d_shortcut.get() : nullptr,
                                                    d_gamma.get(), d_beta.get(), eps, momentum, rm.get(), rv.get(),
                                                    y.get(), mean.get(), invstd.get());
      }
    };
    c.report.run(forward_name(v), shape, dtype, tol, [&] {
      call();
      CheckResult r{relative_error(y.download(), y_ref)};
      // The statistics are fp32 whatever T is, and summed in fp64 on both sides: held to the fp32 bar
      // (scaled to this row's tolerance so one number reports both).
      double stats = relative_error(mean.download(), mean_ref);
      stats = worst(stats, relative_error(invstd.download(), invstd_ref));
      stats = worst(stats, relative_error(rm.download(), rm_ref));
      stats = worst(stats, relative_error(rv.download(), rv_ref));
      if (stats > kTolFp32Elementwise) {
        r.note = "statistics off: " + std::to_string(stats);
        r.error = std::nan("");
      }
      // Determinism of the forward (statistics included): a second run from poisoned outputs and the same
      // running statistics gives the same bytes.
      if (v == Variant::plain) {
        const auto restart = [&] {
          rm.upload(running_mean0);
          rv.upload(running_var0);
          y.poison();
          mean.poison();
          invstd.poison();
        };
        check_same_bytes_again(r, restart, call, y, mean, invstd, rm, rv);
      }
      r.microseconds = microseconds_per_call(stream, call);
      return r;
    });
  }

  // Backward, plain and through the ReLU, with the CPU forward's saved statistics.
  const auto y_relu_t = representable<T>(y_relu);
  DeviceBuffer<T> d_y_relu(count, y_relu_t);
  DeviceBuffer<float> d_mean(cn, save_mean), d_invstd(cn, save_invstd);
  for (const bool masked : {false, true}) {
    std::vector<float> dx_ref(count), dgamma_ref(cn), dbeta_ref(cn);
    if (masked) {
      kernels::batch_norm_relu_backward<float>(rows, channels, x.data(), y_relu_t.data(), dy.data(), gamma.data(),
                                           save_mean.data(), save_invstd.data(), dx_ref.data(), dgamma_ref.data(),
                                           dbeta_ref.data());
    } else {
      kernels::batch_norm_backward<float>(rows, channels, x.data(), dy.data(), gamma.data(), save_mean.data(),
                                      save_invstd.data(), dx_ref.data(), dgamma_ref.data(), dbeta_ref.data());
    }
    DeviceBuffer<T> dx(count);
    DeviceBuffer<float> dgamma(cn), dbeta(cn);
    auto call = [&] {
      if (masked) {
        kernels::cuda::batch_norm_relu_backward<T>(c.context, rows, channels, d_x.get(), d_y_relu.get(), d_dy.get(),
                                               d_gamma.get(), d_mean.get(), d_invstd.get(), dx.get(), dgamma.get(),
                                               dbeta.get());
      } else {
        kernels::cuda::batch_norm_backward<T>(c.context, rows, channels, d_x.get(), d_dy.get(), d_gamma.get(),
                                          d_mean.get(), d_invstd.get(), dx.get(), dgamma.get(), dbeta.get());
      }
    };
    auto poison = [&] {
      dx.poison();
      dgamma.poison();
      dbeta.poison();
    };
    c.report.run(masked ? "batch_norm_relu_backward" : "batch_norm_backward", shape, dtype, tol, [&] {
      poison();
      call();
      CheckResult r{relative_error(dx.download(), dx_ref)};
      const double params = worst(relative_error(dgamma.download(), dgamma_ref),
                                  relative_error(dbeta.download(), dbeta_ref));
      if (params > kTolFp32Elementwise) {
        r.note = "dgamma/dbeta off: " + std::to_string(params);
        r.error = std::nan("");
      }
      check_same_bytes_again(r, poison, call, dx, dgamma, dbeta);
      r.microseconds = microseconds_per_call(stream, call);
      return r;
    });
  }

  // Backward with dx aliasing dy (allowed by the contract).
  c.report.run("batch_norm_backward (dx = dy)", shape, dtype, tol, [&] {
    std::vector<float> dx_ref(count), dgamma_ref(cn), dbeta_ref(cn);
    kernels::batch_norm_backward<float>(rows, channels, x.data(), dy.data(), gamma.data(), save_mean.data(),
                                    save_invstd.data(), dx_ref.data(), dgamma_ref.data(), dbeta_ref.data());
    DeviceBuffer<T> inout(count, dy);
    DeviceBuffer<float> dgamma(cn), dbeta(cn);
    kernels::cuda::batch_norm_backward<T>(c.context, rows, channels, d_x.get(), inout.get(), d_gamma.get(),
                                          d_mean.get(), d_invstd.get(), inout.get(), dgamma.get(), dbeta.get());
    CheckResult r{relative_error(inout.download(), dx_ref)};
    r.microseconds = -1.0;
    return r;
  });

  // Inference mode.
  c.report.run("batch_norm_forward_inference", shape, dtype, tol, [&] {
    std::vector<float> ref(count);
    kernels::batch_norm_forward_inference<float>(rows, channels, x.data(), gamma.data(), beta.data(),
                                                 running_mean0.data(), running_var0.data(), eps, ref.data());
    DeviceBuffer<T> y(count);
    DeviceBuffer<float> rm(cn, running_mean0), rv(cn, running_var0);
    return poisoned_run(y, ref, stream, [&] {
      kernels::cuda::batch_norm_forward_inference<T>(c.context, rows, channels, d_x.get(), d_gamma.get(), d_beta.get(),
                                                 rm.get(), rv.get(), eps, y.get());
    });
  });
}

}  // namespace

void check_batch_norm(Checks& c) {
  struct Case {
    const char* name;
    std::int64_t rows;
    int channels;
  };
  const Case cases[] = {
      {"stem bn1 4x112x112", 4 * 112 * 112, 64},
      {"layer1 bn3 8x56x56", 8 * 56 * 56, 256},
      {"layer2 bn3 4x28x28", 4 * 28 * 28, 512},
      {"layer4 bn3 8x7x7", 8 * 7 * 7, 2048},
      {"odd (scalar path)", 3 * 5 * 7, 37},
      {"two rows", 2, 8},
  };
  for (const Case& k : cases) {
    check_shape<float>(c, k.name, k.rows, k.channels);
    check_shape<bf16>(c, k.name, k.rows, k.channels);
  }
}

}  // namespace train::gpu_check
