// tests/gpu/test_launch_plan.cpp: the host-side partition arithmetic of the CUDA kernels
// (kernels/cuda/launch_plan.h), checked without a GPU: every row, channel and element is covered exactly
// once, and grids stay inside CUDA's limits. Registered with ctest (needs no GPU).

#include "kernels/cuda/launch_plan.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace plan = train::kernels::cuda::plan;

namespace {

int failures = 0;

void expect(bool ok, const char* what, long long a, long long b) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s (%lld, %lld)\n", what, a, b);
    ++failures;
  }
}

void check_column_reduction(std::int64_t rows, int channels) {
  const plan::ColumnReduction r = plan::column_reduction(rows, channels);
  expect(r.channel_tiles * plan::kColumnTile >= channels, "channel tiles cover the channels", rows, channels);
  expect((r.channel_tiles - 1) * plan::kColumnTile < channels, "no empty channel tile", rows, channels);
  expect(r.row_slices >= 1 && r.row_slices <= plan::kMaxRowSlices, "row slices within the grid limit", rows,
         r.row_slices);
  expect(r.rows_per_slice * r.row_slices >= rows, "slices cover the rows", rows, r.rows_per_slice);
  // A last slice wholly past the end can happen once the slice count is capped (it sums nothing and
  // writes zero partials, which the kernels handle); it must never start a whole slice beyond that.
  expect(r.rows_per_slice * (r.row_slices - 2) < rows || r.row_slices < 2, "at most one empty slice", rows,
         r.rows_per_slice);
}

}  // namespace

int main() {
  const long long row_counts[] = {2, 3, 105, 256, 257, 6272, 25088, 50176, 131073, 200000, 802816, 3211264};
  for (const long long rows : row_counts) {
    for (int channels : {1, 8, 37, 64, 256, 2048}) check_column_reduction(rows, channels);
  }
  expect(plan::elementwise_blocks(0) == 1, "at least one block", 0, plan::elementwise_blocks(0));
  expect(plan::elementwise_blocks(1LL << 40) == plan::kElementwiseMaxBlocks, "block cap", 0, 0);

  // Optimizer chunks: every element of every tensor in exactly one chunk, in tensor order.
  const std::vector<std::int64_t> counts = {9408, 64, 0, 16384, 16385, 2048000, 1000, 1};
  std::vector<plan::TensorChunks> per_tensor;
  const auto chunks = plan::optimizer_chunks(counts, &per_tensor);
  for (std::size_t t = 0; t < counts.size(); ++t) {
    std::int64_t covered = 0;
    const std::int64_t end = per_tensor[t].first_chunk + per_tensor[t].chunk_count;
    for (std::int64_t k = per_tensor[t].first_chunk; k < end; ++k) {
      const auto& chunk = chunks[static_cast<std::size_t>(k)];
      expect(chunk.tensor == static_cast<std::int32_t>(t), "chunk belongs to its tensor", k, chunk.tensor);
      expect(chunk.begin == covered, "chunks contiguous", k, chunk.begin);
      covered += std::min(plan::kOptimizerChunk, counts[t] - chunk.begin);
    }
    expect(covered == counts[t], "chunks cover the tensor", static_cast<long long>(t), covered);
  }
  if (failures == 0) std::printf("launch plan: all checks passed\n");
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
