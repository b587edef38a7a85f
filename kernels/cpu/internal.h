#pragma once
// kernels/cpu/internal.h: helpers shared by the CPU ops (not part of the op contracts).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace train::kernels::cpu {

// Loops over fewer elements than this run on the calling thread: waking the OpenMP team costs more than
// it saves (on a loaded machine, far more). Results do not depend on it.
inline constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 15;
inline bool parallel_worth(std::int64_t elements) { return elements >= kParallelMinWork; }

// Rows of a reduction are cut into at most this many blocks, a number fixed by the shape alone, so the
// partial sums and their order do not depend on the thread count.
inline constexpr std::int64_t kReduceBlocks = 64;

// Per-column sums over rows [0, rows), in double: accumulate(r0, r1, acc) adds rows [r0, r1) into
// acc[0, width) (zeroed by the caller of accumulate). Blocks run in parallel; their partial sums are
// added in block order into out[0, width).
template <typename Accumulate>
void blocked_column_sums(std::int64_t rows, std::int64_t width, Accumulate&& accumulate, double* out) {
  const std::int64_t blocks = std::max<std::int64_t>(1, std::min(rows, kReduceBlocks));
  std::vector<double> partial(static_cast<std::size_t>(blocks * width), 0.0);
#pragma omp parallel for schedule(static) if (parallel_worth(rows * width))
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t r0 = rows * b / blocks;
    const std::int64_t r1 = rows * (b + 1) / blocks;
    accumulate(r0, r1, partial.data() + b * width);
  }
  std::fill(out, out + width, 0.0);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const double* p = partial.data() + b * width;
    for (std::int64_t j = 0; j < width; ++j) out[j] += p[j];
  }
}

// The per-column sums of the row-major rows x width matrix m, in double (in blocked_column_sums' order).
template <typename T>
void column_sums(std::int64_t rows, int width, const T* m, double* out) {
  blocked_column_sums(
      rows, width,
      [&](std::int64_t r0, std::int64_t r1, double* acc) {
        for (std::int64_t r = r0; r < r1; ++r) {
          const T* row = m + r * width;
          for (int c = 0; c < width; ++c) acc[c] += static_cast<double>(row[c]);
        }
      },
      out);
}

// A grow-only buffer of T per calling thread (the column matrices of conv2d_*).
template <typename T>
T* thread_scratch(std::size_t count) {
  thread_local std::unique_ptr<T[]> buffer;
  thread_local std::size_t capacity = 0;
  if (count > capacity) {
    buffer.reset();
    buffer.reset(new T[count]);
    capacity = count;
  }
  return buffer.get();
}

}  // namespace train::kernels::cpu
