// tests/gpu/gpu_infer.cpp: inference of a model file on the GPU, with the code `train` runs for validation
// (GpuResNet::infer over the plan's storage, weights imported as the trainer imports them), so that a
// script compares its logits with torchvision's on the same file and images (scripts/gpu/gpu_training_check.py).
//
//   gpu_infer DEPTH CLASSES MODEL.safetensors IMAGES.safetensors OUT.safetensors [bf16|fp32]
//
// IMAGES holds "images" [N, H, W, 3] float32 (NHWC, normalised as train normalises); OUT gets "logits"
// [N, CLASSES] float32. Exit 0 on success, 1 on an error (printed), 2 when no GPU is visible.
#include "kernels/cuda/handles.h"
#include "runtime/comm/gradient_buckets.h"
#include "runtime/model/gpu_resnet.h"
#include "runtime/model/model_state.h"
#include "runtime/model/resnet_plan.h"
#include "runtime/model_io/safetensors.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using train::kernels::cuda::bf16;

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", call, cudaGetErrorString(status)));
}

template <typename T>
std::vector<float> infer(int depth, int classes, const train::model_io::SafetensorsFile& model,
                         const train::model_io::Tensor& images) {
  const int n = static_cast<int>(images.shape[0]);
  const int h = static_cast<int>(images.shape[1]);
  const int w = static_cast<int>(images.shape[2]);
  train::model::ResNetPlan plan =
      train::model::plan_resnet(train::model::build_resnet_spec(depth, classes), std::max(n, 2), h, w);
  train::model::HostModelState state{std::vector<float>(plan.parameter_elements),
                                     std::vector<float>(plan.float_buffer_elements),
                                     std::vector<int64_t>(plan.tracked_buffers)};
  train::model::initialize_resnet(plan, 0, state.parameters.data(), state.float_buffers.data(), state.tracked.data());
  train::model::import_model_state(plan, model.tensors, state.parameters.data(), state.float_buffers.data(),
                                   state.tracked.data());

  namespace cuda = train::kernels::cuda;
  const cuda::Stream owned_stream = cuda::make_stream();
  cudaStream_t stream = owned_stream.get();
  std::vector<float> logits(static_cast<size_t>(n) * static_cast<size_t>(classes));
  {
    cuda::Context context(stream);
    const train::comm::BucketPlan buckets =
        train::comm::plan_gradient_buckets(plan.parameter_counts(), size_t{25} << 20);
    const cuda::DeviceMemory gradient_memory = cuda::allocate_device(sizeof(float) * buckets.total_elements);
    train::model::GpuResNet<T> gpu(plan, train::comm::GradientViews<float>{cuda::as<float>(gradient_memory), &buckets},
                                   context);
    gpu.upload_state(state);
    const std::vector<float> pixels = images.to_float();
    const cuda::DeviceMemory pixel_memory = cuda::allocate_device(sizeof(float) * pixels.size());
    const cuda::DeviceMemory image_memory = cuda::allocate_device(sizeof(T) * pixels.size());
    const cuda::DeviceMemory logit_memory = cuda::allocate_device(sizeof(T) * logits.size());
    const cuda::DeviceMemory float_logit_memory = cuda::allocate_device(sizeof(float) * logits.size());
    auto* device_pixels = cuda::as<float>(pixel_memory);
    auto* device_images = cuda::as<T>(image_memory);
    auto* device_logits = cuda::as<T>(logit_memory);
    auto* float_logits = cuda::as<float>(float_logit_memory);
    check(cudaMemcpyAsync(device_pixels, pixels.data(), sizeof(float) * pixels.size(), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync");
    cuda::cast<float, T>(context, static_cast<int64_t>(pixels.size()), device_pixels, device_images);
    gpu.infer(device_images, n, device_logits);
    cuda::cast<T, float>(context, static_cast<int64_t>(logits.size()), device_logits, float_logits);
    check(cudaMemcpyAsync(logits.data(), float_logits, sizeof(float) * logits.size(), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  return logits;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    fmt::print(stderr, "usage: gpu_infer DEPTH CLASSES MODEL.safetensors IMAGES.safetensors OUT.safetensors [bf16|fp32]\n");
    return 64;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    fmt::print(stderr, "gpu_infer: no GPU visible\n");
    return 2;
  }
  try {
    const int depth = std::atoi(argv[1]), classes = std::atoi(argv[2]);
    const std::string precision = argc == 7 ? argv[6] : "bf16";
    if (precision != "bf16" && precision != "fp32") throw std::runtime_error("precision: expected bf16 or fp32");
    const auto model = train::model_io::read_safetensors(argv[3]);
    const auto batch = train::model_io::read_safetensors(argv[4]);
    const train::model_io::Tensor* images = batch.find("images");
    if (images == nullptr || images->shape.size() != 4 || images->shape[3] != 3) {
      throw std::runtime_error("IMAGES needs \"images\" [N, H, W, 3]");
    }
    const std::vector<float> logits = precision == "bf16" ? infer<bf16>(depth, classes, model, *images)
                                                          : infer<float>(depth, classes, model, *images);
    const int n = static_cast<int>(images->shape[0]);
    train::model_io::write_safetensors(argv[5], {{"logits", train::model_io::Dtype::F32, {n, classes}, logits.data()}});
    return 0;
  } catch (const std::exception& error) {
    fmt::print(stderr, "gpu_infer: {}\n", error.what());
    return 1;
  }
}
