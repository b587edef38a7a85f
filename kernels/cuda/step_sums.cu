// kernels/cuda/step_sums.cu: a step's loss, images and hits added on the device (kernels/cuda/step_sums.h).

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/step_sums.h"

namespace train::kernels::cuda {
namespace {

__global__ void add_step(const float* loss, const std::int32_t* hits, int n, double* sums) {
  sums[0] += static_cast<double>(*loss) * n;
  sums[1] += n;
  sums[2] += *hits;
}

}  // namespace

void add_step_sums(cudaStream_t stream, const float* loss, const std::int32_t* hits, int n, double* sums) {
  add_step<<<1, 1, 0, stream>>>(loss, hits, n, sums);
  TRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace train::kernels::cuda
