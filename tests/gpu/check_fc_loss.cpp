// tests/gpu/check_fc_loss.cpp: the fully connected layer (cuBLAS) and softmax cross-entropy with label
// smoothing against the CPU reference.

#include "kernels/ops.h"
#include "tests/gpu/gpu_check_support.h"

#include <cmath>
#include <string>
#include <type_traits>

namespace train::gpu_check {
namespace {

template <typename T>
void check_fc(Checks& c, const std::string& name, int n, int in, int out, bool bias, bool input_gradient) {
  const std::string shape = name + " " + std::to_string(n) + "x" + std::to_string(in) + "->" + std::to_string(out) +
                            (bias ? "" : " no bias") + (input_gradient ? "" : " no dx");
  const char* dtype = Element<T>::name;
  const double tol = std::is_same_v<T, float> ? kTolFp32Product : kTolBf16;
  const std::size_t xn = static_cast<std::size_t>(n) * in, wn = static_cast<std::size_t>(out) * in,
                    yn = static_cast<std::size_t>(n) * out;
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(in));
  const auto x = representable<T>(c.random.uniform(xn, 0.0f, 2.0f));
  const auto w = representable<T>(c.random.uniform(wn, -w_scale, w_scale));
  const auto b = representable<T>(c.random.uniform(static_cast<std::size_t>(out), -w_scale, w_scale));
  const auto dy = representable<T>(c.random.normal(yn, 0.0f, 0.01f));
  DeviceBuffer<T> dx_in(xn, x), dw_in(wn, w), db_in(out, b), ddy(yn, dy);
  cudaStream_t stream = c.context.stream();

  c.report.run("fully_connected_forward", shape, dtype, tol, [&] {
    std::vector<float> ref(yn);
    kernels::fully_connected_forward<float>(n, in, out, x.data(), w.data(), bias ? b.data() : nullptr, ref.data());
    DeviceBuffer<T> y(yn);
    return poisoned_run(y, ref, stream, [&] {
      kernels::cuda::fully_connected_forward<T>(c.context, n, in, out, dx_in.get(), dw_in.get(),
                                            bias ? db_in.get() : nullptr, y.get());
    });
  });

  c.report.run("fully_connected_backward", shape, dtype, tol, [&] {
    std::vector<float> dx_ref(xn), dw_ref(wn), db_ref(static_cast<std::size_t>(out));
    kernels::fully_connected_backward<float>(n, in, out, x.data(), w.data(), dy.data(),
                                         input_gradient ? dx_ref.data() : nullptr, dw_ref.data(),
                                         bias ? db_ref.data() : nullptr);
    DeviceBuffer<T> dx(xn), dw(wn), db(out);
    auto poison = [&] {
      dx.poison();
      dw.poison();
      db.poison();
    };
    auto call = [&] {
      kernels::cuda::fully_connected_backward<T>(c.context, n, in, out, dx_in.get(), dw_in.get(), ddy.get(),
                                             input_gradient ? dx.get() : nullptr, dw.get(), bias ? db.get() : nullptr);
    };
    poison();
    call();
    double error = relative_error(dw.download(), dw_ref);
    if (input_gradient) error = worst(error, relative_error(dx.download(), dx_ref));
    if (bias) error = worst(error, relative_error(db.download(), db_ref));
    CheckResult r{error};
    check_same_bytes_again(r, poison, call, dw, dx, db);
    r.microseconds = microseconds_per_call(stream, call);
    return r;
  });
}

template <typename T>
void check_cross_entropy(Checks& c, const std::string& name, int n, int classes, float smoothing, bool in_place) {
  const std::string shape = name + " " + std::to_string(n) + "x" + std::to_string(classes) + " eps=" +
                            std::to_string(smoothing).substr(0, 4) + (in_place ? " dlogits=logits" : "");
  const char* dtype = Element<T>::name;
  const double tol = std::is_same_v<T, float> ? kTolFp32Elementwise : kTolBf16;
  const std::size_t zn = static_cast<std::size_t>(n) * classes;
  const auto logits = representable<T>(c.random.normal(zn, 0.0f, 3.0f));
  const auto labels = c.random.labels(static_cast<std::size_t>(n), classes);
  std::vector<float> labels_f(labels.begin(), labels.end());
  DeviceBuffer<std::int32_t> d_labels(static_cast<std::size_t>(n), labels_f);

  c.report.run("softmax_cross_entropy", shape, dtype, tol, [&] {
    std::vector<float> dref(zn);
    const double loss_ref =
        kernels::softmax_cross_entropy<float>(n, classes, logits.data(), labels.data(), smoothing, dref.data());
    DeviceBuffer<T> z(zn, logits), dz(zn);
    DeviceBuffer<float> loss(1);
    loss.poison();
    dz.poison();
    T* out = in_place ? z.get() : dz.get();
    auto call = [&] {
      kernels::cuda::softmax_cross_entropy<T>(c.context, n, classes, z.get(), d_labels.get(), smoothing, loss.get(),
                                              out);
    };
    call();
    const float loss_gpu = kernels::cuda::read_device_scalar(c.context, loss.get());
    // The loss is fp32 (from fp64 sums) whatever T is: the fp32 bar.
    const double loss_error = std::fabs(loss_gpu - loss_ref) / (std::fabs(loss_ref) + 1e-30);
    CheckResult r{relative_error(in_place ? z.download() : dz.download(), dref)};
    if (!(loss_error <= kTolFp32Elementwise)) {
      r.note = "loss " + std::to_string(loss_gpu) + " vs " + std::to_string(loss_ref);
      r.error = std::nan("");
    } else {
      r.note = "loss rel err " + std::to_string(loss_error);
    }
    if (!in_place) r.microseconds = microseconds_per_call(c.context.stream(), call);
    else r.microseconds = -1.0;  // in place, repeated calls would differentiate the gradient
    return r;
  });
}

template <typename T>
void check_all(Checks& c) {
  check_fc<T>(c, "resnet fc", 8, 2048, 1000, true, true);
  check_fc<T>(c, "odd", 5, 33, 17, false, false);
  check_fc<T>(c, "odd", 3, 9, 13, true, true);
  check_cross_entropy<T>(c, "imagenet", 8, 1000, 0.1f, false);
  check_cross_entropy<T>(c, "imagenet", 8, 1000, 0.1f, true);
  check_cross_entropy<T>(c, "odd", 3, 7, 0.0f, false);
  check_cross_entropy<T>(c, "batch 256", 256, 1000, 0.1f, false);
}

}  // namespace

void check_fully_connected_and_loss(Checks& c) {
  check_all<float>(c);
  check_all<bf16>(c);

  // A label outside [0, classes) cannot throw on the device: the loss must come out NaN.
  c.report.run("softmax_cross_entropy bad label", "2x5 label 7", "fp32", 0.0, [&] {
    DeviceBuffer<float> z(10, std::vector<float>(10, 0.5f)), loss(1);
    DeviceBuffer<std::int32_t> labels(2, std::vector<float>{1.0f, 7.0f});
    kernels::cuda::softmax_cross_entropy<float>(c.context, 2, 5, z.get(), labels.get(), 0.0f, loss.get(), nullptr);
    const float value = kernels::cuda::read_device_scalar(c.context, loss.get());
    CheckResult r{std::isnan(value) ? 0.0 : 1.0};
    r.note = "loss = " + std::to_string(value);
    r.microseconds = -1.0;
    return r;
  });
}

}  // namespace train::gpu_check
