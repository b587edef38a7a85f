#pragma once
// kernels/cuda/launch_plan.h (internal): the host-side arithmetic of grids, reduction partitions and
// optimizer chunks, in plain C++ so it can be reasoned about (and tested) without a GPU.
//
// Every partition here depends on the shape alone, never on the device (SM count) or on timing: that is
// what makes the blocked reductions bit-reproducible.

#include <algorithm>
#include <cstdint>
#include <vector>

namespace train::kernels::cuda::plan {

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Grid-stride elementwise kernels: 256 threads, at most this many blocks (more work per thread beyond).
inline constexpr int kElementwiseThreads = 256;
inline constexpr std::int64_t kElementwiseMaxBlocks = 8192;
inline int elementwise_blocks(std::int64_t work_items) {
  return static_cast<int>(std::clamp<std::int64_t>(ceil_div(work_items, kElementwiseThreads), 1,
                                                   kElementwiseMaxBlocks));
}

// Column reductions over rows x channels (batch norm statistics and gradients): a block is 32 channels
// (threadIdx.x, one per lane, so a warp reads 32 consecutive values of a row) times 8 row lanes
// (threadIdx.y). Rows are cut into row_blocks slices of rows_per_block; each (channel tile, slice) block
// writes one partial per channel; a second kernel adds the partials of a channel in slice order.
inline constexpr int kColumnTile = 32;
inline constexpr int kRowLanes = 8;
inline constexpr std::int64_t kRowsPerSliceTarget = 256;
inline constexpr std::int64_t kMaxRowSlices = 512;  // gridDim.y limit is 65535; partials stay small
struct ColumnReduction {
  int channel_tiles = 0;
  int row_slices = 0;
  std::int64_t rows_per_slice = 0;
};
inline ColumnReduction column_reduction(std::int64_t rows, int channels) {
  ColumnReduction r;
  r.channel_tiles = static_cast<int>(ceil_div(channels, kColumnTile));
  r.row_slices = static_cast<int>(std::clamp<std::int64_t>(ceil_div(rows, kRowsPerSliceTarget), 1, kMaxRowSlices));
  r.rows_per_slice = ceil_div(rows, r.row_slices);
  return r;
}
// The combining kernel: 32 channels x 16 slice lanes per block.
inline constexpr int kCombineLanes = 16;

// Rounds a byte offset up so the next array in a carved-up workspace stays 256-byte aligned.
constexpr std::size_t align_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Optimizer chunks: every tensor is cut into chunks of kOptimizerChunk elements (the last one shorter);
// one block per chunk, so one launch covers all tensors with even work per block.
inline constexpr std::int64_t kOptimizerChunk = 16384;
inline constexpr int kOptimizerThreads = 256;
struct OptimizerChunk {
  std::int32_t tensor = 0;
  std::int32_t unused = 0;
  std::int64_t begin = 0;  // first element of the chunk inside its tensor
};
struct TensorChunks {
  std::int64_t first_chunk = 0;
  std::int64_t chunk_count = 0;
};
// Chunks of all tensors in tensor order; tensor i owns chunks [first_chunk, first_chunk + chunk_count).
// A tensor of count <= 0 owns none.
inline std::vector<OptimizerChunk> optimizer_chunks(const std::vector<std::int64_t>& counts,
                                                    std::vector<TensorChunks>* per_tensor) {
  std::vector<OptimizerChunk> chunks;
  per_tensor->assign(counts.size(), TensorChunks{});
  for (std::size_t i = 0; i < counts.size(); ++i) {
    (*per_tensor)[i].first_chunk = static_cast<std::int64_t>(chunks.size());
    for (std::int64_t begin = 0; begin < counts[i]; begin += kOptimizerChunk) {
      chunks.push_back(OptimizerChunk{static_cast<std::int32_t>(i), 0, begin});
    }
    (*per_tensor)[i].chunk_count = static_cast<std::int64_t>(chunks.size()) - (*per_tensor)[i].first_chunk;
  }
  return chunks;
}

}  // namespace train::kernels::cuda::plan
