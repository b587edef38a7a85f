// tests/gpu/check_conv.cpp: cuDNN convolutions (forward, input gradient, weight gradient) against the
// CPU reference on ResNet-50's own shapes, in fp32 and bf16.

#include "kernels/ops.h"
#include "tests/gpu/gpu_check_support.h"

#include <cmath>
#include <string>
#include <type_traits>

namespace train::gpu_check {
namespace {

std::string describe(const kernels::Conv2dShape& s) {
  return std::to_string(s.n) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) + "x" + std::to_string(s.in_c) +
         " k" + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) + "/" + std::to_string(s.stride_h) +
         " p" + std::to_string(s.pad_h) + " ->" + std::to_string(s.out_c);
}

template <typename T>
void check_shape(Checks& c, const std::string& name, const kernels::Conv2dShape& s) {
  const std::string shape = name + " " + describe(s);
  const char* dtype = Element<T>::name;
  const double tol = std::is_same_v<T, float> ? kTolFp32Product : kTolBf16;
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(s.kernel_h * s.kernel_w * s.in_c));
  const auto x = representable<T>(c.random.normal(s.x_size(), 0.0f, 1.0f));
  const auto w = representable<T>(c.random.uniform(s.w_size(), -w_scale, w_scale));
  const auto dy = representable<T>(c.random.normal(s.y_size(), 0.0f, 1.0f));
  DeviceBuffer<T> dx_device(s.x_size(), x), dw_device(s.w_size(), w), ddy(s.y_size(), dy);
  cudaStream_t stream = c.context.stream();

  c.report.run("conv2d_forward", shape, dtype, tol, [&] {
    std::vector<float> ref(s.y_size());
    kernels::conv2d_forward<float>(s, x.data(), w.data(), ref.data());
    DeviceBuffer<T> y(s.y_size());
    return poisoned_run(y, ref, stream, [&] {
      kernels::cuda::conv2d_forward<T>(c.context, s, dx_device.get(), dw_device.get(), y.get());
    });
  });

  c.report.run("conv2d_backward_input", shape, dtype, tol, [&] {
    std::vector<float> ref(s.x_size());
    kernels::conv2d_backward_input<float>(s, dy.data(), w.data(), ref.data());
    DeviceBuffer<T> dx(s.x_size());
    return poisoned_run(dx, ref, stream, [&] {
      kernels::cuda::conv2d_backward_input<T>(c.context, s, ddy.get(), dw_device.get(), dx.get());
    });
  });

  c.report.run("conv2d_backward_weight", shape, dtype, tol, [&] {
    std::vector<float> ref(s.w_size());
    kernels::conv2d_backward_weight<float>(s, x.data(), dy.data(), ref.data());
    DeviceBuffer<T> dw(s.w_size());
    dw.poison();
    auto call = [&] { kernels::cuda::conv2d_backward_weight<T>(c.context, s, dx_device.get(), ddy.get(), dw.get()); };
    call();
    CheckResult r{relative_error(dw.download(), ref)};
    // Determinism: a second run from a poisoned buffer gives the same bytes.
    check_same_bytes_again(r, [&] { dw.poison(); }, call, dw);
    r.microseconds = microseconds_per_call(stream, call);
    return r;
  });
}

}  // namespace

void check_convolutions(Checks& c) {
  using kernels::Conv2dShape;
  struct Case {
    const char* name;
    Conv2dShape shape;
    bool bf16;  // also in bf16 (odd channel counts only in fp32: tensor-core paths want multiples of 8)
  };
  const Case cases[] = {
      {"stem 7x7/2", Conv2dShape::square(4, 224, 224, 3, 64, 7, 2, 3), true},
      {"layer1 3x3", Conv2dShape::square(8, 56, 56, 64, 64, 3, 1, 1), true},
      {"layer1 1x1 256->64", Conv2dShape::square(8, 56, 56, 256, 64, 1, 1, 0), true},
      {"layer2.0 3x3/2", Conv2dShape::square(4, 56, 56, 128, 128, 3, 2, 1), true},
      {"layer3.0 downsample 1x1/2", Conv2dShape::square(4, 28, 28, 512, 1024, 1, 2, 0), true},
      {"odd", Conv2dShape{3, 9, 7, 5, 6, 3, 2, 2, 1, 1, 0}, false},
  };
  for (const Case& k : cases) {
    check_shape<float>(c, k.name, k.shape);
    if (k.bf16) check_shape<bf16>(c, k.name, k.shape);
  }
}

}  // namespace train::gpu_check
