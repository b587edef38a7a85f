// tests/gpu/check_elementwise_pool.cpp: ReLU, add, casts, max pooling and global average pooling against
// the CPU reference, on packed (16-byte) and scalar (odd count / misaligned) paths.

#include "kernels/ops.h"
#include "tests/gpu/gpu_check_support.h"

#include <cmath>
#include <string>
#include <type_traits>

namespace train::gpu_check {
namespace {

template <typename T>
void check_elementwise(Checks& c, const std::string& name, std::int64_t count, int offset) {
  // offset > 0 shifts every pointer by that many elements: misaligned, so the scalar path runs.
  const std::string shape = name + " " + std::to_string(count) + (offset != 0 ? " +" + std::to_string(offset) : "");
  const char* dtype = Element<T>::name;
  const double tol = std::is_same_v<T, float> ? kTolFp32Elementwise : kTolBf16;
  const std::size_t n = static_cast<std::size_t>(count), padded = n + static_cast<std::size_t>(offset);
  auto with_offset = [&](std::vector<float> v) {
    v.insert(v.begin(), static_cast<std::size_t>(offset), 0.0f);
    return v;
  };
  auto without_offset = [&](std::vector<float> v) { return std::vector<float>(v.begin() + offset, v.end()); };
  const auto a = representable<T>(c.random.normal(n, 0.0f, 1.0f));
  const auto b = representable<T>(c.random.normal(n, 0.0f, 1.0f));
  DeviceBuffer<T> da(padded, with_offset(a)), db(padded, with_offset(b));
  cudaStream_t stream = c.context.stream();

  c.report.run("relu_forward", shape, dtype, tol, [&] {
    std::vector<float> ref(n);
    kernels::relu_forward<float>(count, a.data(), ref.data());
    DeviceBuffer<T> y(padded);
    return poisoned_run(
        y, ref, stream, [&] { kernels::cuda::relu_forward<T>(c.context, count, da.get() + offset, y.get() + offset); },
        without_offset);
  });

  c.report.run("relu_backward", shape, dtype, tol, [&] {
    // y = relu(a) as the mask, dy = b.
    std::vector<float> y(n), ref(n);
    kernels::relu_forward<float>(count, a.data(), y.data());
    kernels::relu_backward<float>(count, y.data(), b.data(), ref.data());
    DeviceBuffer<T> dy_mask(padded, with_offset(y)), dx(padded);
    return poisoned_run(
        dx, ref, stream,
        [&] {
          kernels::cuda::relu_backward<T>(c.context, count, dy_mask.get() + offset, db.get() + offset,
                                          dx.get() + offset);
        },
        without_offset);
  });

  c.report.run("add", shape, dtype, tol, [&] {
    std::vector<float> ref(n);
    kernels::add<float>(count, a.data(), b.data(), ref.data());
    DeviceBuffer<T> y(padded);
    return poisoned_run(
        y, ref, stream,
        [&] { kernels::cuda::add<T>(c.context, count, da.get() + offset, db.get() + offset, y.get() + offset); },
        without_offset);
  });

  c.report.run("add (y = a, in place)", shape, dtype, tol, [&] {
    std::vector<float> ref(n);
    kernels::add<float>(count, a.data(), b.data(), ref.data());
    DeviceBuffer<T> inout(padded, with_offset(a));
    kernels::cuda::add<T>(c.context, count, inout.get() + offset, db.get() + offset, inout.get() + offset);
    CheckResult r{relative_error(without_offset(inout.download()), ref)};
    r.microseconds = -1.0;
    return r;
  });
}

void check_casts(Checks& c) {
  const std::int64_t count = 1000003;
  const auto values = c.random.normal(static_cast<std::size_t>(count), 0.0f, 3.0f);
  c.report.run("cast fp32->bf16", std::to_string(count), "bf16", 0.0, [&] {
    DeviceBuffer<float> x(count, values);
    DeviceBuffer<bf16> y(count);
    // Round to nearest even on both sides: exact agreement expected.
    return poisoned_run(y, representable<bf16>(values), c.context.stream(),
                        [&] { kernels::cuda::cast<float, bf16>(c.context, count, x.get(), y.get()); });
  });
  c.report.run("cast bf16->fp32", std::to_string(count), "bf16", 0.0, [&] {
    const auto exact = representable<bf16>(values);
    DeviceBuffer<bf16> x(count, exact);
    DeviceBuffer<float> y(count);
    return poisoned_run(y, exact, c.context.stream(),
                        [&] { kernels::cuda::cast<bf16, float>(c.context, count, x.get(), y.get()); });
  });
}

template <typename T>
void check_max_pool(Checks& c, const std::string& name, const kernels::Pool2dShape& s) {
  const std::string shape = name + " " + std::to_string(s.n) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) +
                            "x" + std::to_string(s.c) + " k" + std::to_string(s.kernel) + "/" +
                            std::to_string(s.stride) + " p" + std::to_string(s.pad);
  const char* dtype = Element<T>::name;
  const double tol = std::is_same_v<T, float> ? kTolFp32Elementwise : kTolBf16;
  const std::size_t xn = static_cast<std::size_t>(s.x_size()), yn = static_cast<std::size_t>(s.y_size());
  const auto x = representable<T>(c.random.normal(xn, 0.0f, 1.0f));
  const auto dy = representable<T>(c.random.normal(yn, 0.0f, 1.0f));
  std::vector<float> y_ref(yn);
  std::vector<std::int32_t> argmax_ref(yn);
  kernels::max_pool_forward<float>(s, x.data(), y_ref.data(), argmax_ref.data());
  DeviceBuffer<T> dx_in(xn, x), ddy(yn, dy);
  DeviceBuffer<std::int32_t> argmax(yn);
  cudaStream_t stream = c.context.stream();

  c.report.run("max_pool_forward", shape, dtype, tol, [&] {
    DeviceBuffer<T> y(yn);
    y.poison();
    argmax.poison();
    auto call = [&] { kernels::cuda::max_pool_forward<T>(c.context, s, dx_in.get(), y.get(), argmax.get()); };
    call();
    CheckResult r{relative_error(y.download(), y_ref)};
    // The winners must be the very same elements (ties included: first in window order on both sides).
    const auto gpu_argmax = argmax.download();
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < yn; ++i) mismatches += gpu_argmax[i] != static_cast<float>(argmax_ref[i]);
    if (mismatches != 0) {
      r.note = std::to_string(mismatches) + " argmax mismatches";
      r.error = std::nan("");
    }
    r.microseconds = microseconds_per_call(stream, call);
    return r;
  });

  c.report.run("max_pool_backward", shape, dtype, tol, [&] {
    // The GPU's argmax is the CPU's (checked above); the backward gets the CPU's to be independent.
    std::vector<float> argmax_values(argmax_ref.begin(), argmax_ref.end());
    argmax.upload(argmax_values);
    std::vector<float> ref(xn);
    kernels::max_pool_backward<float>(s, dy.data(), argmax_ref.data(), ref.data());
    DeviceBuffer<T> dx(xn);
    return poisoned_run(dx, ref, stream,
                        [&] { kernels::cuda::max_pool_backward<T>(c.context, s, ddy.get(), argmax.get(), dx.get()); });
  });
}

template <typename T>
void check_avg_pool(Checks& c, const std::string& name, int n, int hw, int ch) {
  const std::string shape = name + " " + std::to_string(n) + "x" + std::to_string(hw) + "x" + std::to_string(ch);
  const char* dtype = Element<T>::name;
  const double tol = std::is_same_v<T, float> ? kTolFp32Elementwise : kTolBf16;
  const std::size_t xn = static_cast<std::size_t>(n) * hw * ch, yn = static_cast<std::size_t>(n) * ch;
  const auto x = representable<T>(c.random.uniform(xn, 0.0f, 2.0f));  // post-ReLU-like
  const auto dy = representable<T>(c.random.normal(yn, 0.0f, 1.0f));
  DeviceBuffer<T> dx_in(xn, x), ddy(yn, dy);
  cudaStream_t stream = c.context.stream();

  c.report.run("global_avg_pool_forward", shape, dtype, tol, [&] {
    std::vector<float> ref(yn);
    kernels::global_avg_pool_forward<float>(n, hw, ch, x.data(), ref.data());
    DeviceBuffer<T> y(yn);
    return poisoned_run(y, ref, stream,
                        [&] { kernels::cuda::global_avg_pool_forward<T>(c.context, n, hw, ch, dx_in.get(), y.get()); });
  });

  c.report.run("global_avg_pool_backward", shape, dtype, tol, [&] {
    std::vector<float> ref(xn);
    kernels::global_avg_pool_backward<float>(n, hw, ch, dy.data(), ref.data());
    DeviceBuffer<T> dx(xn);
    return poisoned_run(dx, ref, stream,
                        [&] { kernels::cuda::global_avg_pool_backward<T>(c.context, n, hw, ch, ddy.get(), dx.get()); });
  });
}

template <typename T>
void check_all(Checks& c) {
  check_elementwise<T>(c, "stem 4x112x112x64", std::int64_t{4} * 112 * 112 * 64, 0);
  check_elementwise<T>(c, "odd", 1001, 0);
  check_elementwise<T>(c, "misaligned", 4096, 1);
  check_max_pool<T>(c, "stem maxpool", kernels::Pool2dShape{4, 112, 112, 64, 3, 2, 1});
  check_max_pool<T>(c, "odd", kernels::Pool2dShape{3, 9, 11, 5, 3, 2, 1});
  check_max_pool<T>(c, "k2/2 no pad", kernels::Pool2dShape{2, 8, 8, 16, 2, 2, 0});
  check_avg_pool<T>(c, "head 8x7x7x2048", 8, 49, 2048);
  check_avg_pool<T>(c, "odd", 3, 35, 5);
}

}  // namespace

void check_elementwise_and_pooling(Checks& c) {
  check_all<float>(c);
  check_all<bf16>(c);
  check_casts(c);
}

}  // namespace train::gpu_check
