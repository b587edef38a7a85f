// Everything about a ResNet that both models need, decided once from its ResNetSpec and the largest batch:
// the parameter table (offsets into one flat store, in forward order), where each BN buffer lives, every
// layer's parameters, fusion and shapes, which activations need storage of their own and which need a
// gradient, and the batch-norm constants. CpuResNet and GpuResNet each keep only their storage and their
// op calls (runtime/model/resnet_passes.h walks the layers for both); the gradient buckets are laid out by
// the communication layer from parameter_elements() (runtime/comm/gradient_buckets.h).
#pragma once

#include "runtime/model/layer_fusion.h"
#include "runtime/model/resnet_spec.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace train {

// PyTorch's BatchNorm2d defaults, as torchvision's ResNet uses them.
inline constexpr double bn_epsilon = 1e-5;
inline constexpr double bn_momentum = 0.1;

// An activation: NHWC.
struct ActivationShape {
  int n = 0, h = 0, w = 0, c = 0;
  int64_t size() const { return int64_t{n} * h * w * c; }
};

struct ParameterSlot {
  int spec_index = 0;  // into spec.tensors
  size_t offset = 0;   // into the flat parameter (and momentum) store, forward order
  int64_t count = 0;
};

// One layer as the models run it: the fusion plan's entry, and where its parameters and buffers are.
struct LayerPlan : LayerFusion {
  int weight = -1, bias = -1;                             // parameter indices (conv, bn, fc)
  int running_mean = -1, running_var = -1, tracked = -1;  // spec indices of a BN's buffers
};

struct ResNetPlan {
  ResNetSpec spec;
  int max_batch = 0, height = 0, width = 0;
  std::vector<ParameterSlot> parameters;     // forward order
  size_t parameter_elements = 0;             // the flat store's size
  std::vector<size_t> buffer_offset;         // by spec index: into the float buffers, or the tracked counters
  size_t float_buffer_elements = 0;          // running_mean and running_var of every BN
  size_t tracked_buffers = 0;                // num_batches_tracked of every BN
  std::vector<LayerPlan> layers;             // one per spec.layers entry
  std::vector<ActivationShape> max_shapes;   // every activation at max_batch (0: the images, 3 channels)
  // Storage: an activation the fused training pass never writes (a BN output fused into its ReLU or
  // residual add, an add output fused into its ReLU) may share the storage of the ReLU output it is fused
  // into; storage_of[a] names the activation whose storage a uses (a itself when it has its own).
  std::vector<int> storage_of;
  // Activations whose gradient backward writes (not the images, not BN outputs whose backward takes the
  // gradient at the ReLU's output).
  std::vector<bool> gradient_needed;
  int64_t largest_activation = 0;            // elements of the largest activation (gradient scratch)
  int max_bn_channels = 0;

  int parameter_tensors() const { return static_cast<int>(parameters.size()); }
  // Elements of every parameter tensor in forward order: what the gradient buckets are planned from.
  std::vector<size_t> parameter_counts() const;
  const TensorSpec& parameter_spec(int p) const { return spec.tensors[static_cast<size_t>(parameters[static_cast<size_t>(p)].spec_index)]; }
  // Every activation's shape at `batch` images (1..max_batch). Throws std::invalid_argument otherwise.
  std::vector<ActivationShape> shapes_at(int batch) const;
};

// Throws std::invalid_argument when max_batch < 2 (batch norm in training needs two values per channel)
// or the input is too small for the network.
ResNetPlan plan_resnet(ResNetSpec spec, int max_batch, int height, int width);

// torchvision's default initialisation into a flat parameter store and buffers laid out by `plan`:
// convolutions Kaiming-normal (fan_out, ReLU gain), BN weight 1 and bias 0, the classifier uniform in
// +-1/sqrt(fan_in) (weight and bias), running statistics 0 and 1, counters 0. Conv weights are OHWI.
template <typename T>
void initialize_resnet(const ResNetPlan& plan, uint64_t seed, T* parameters, T* float_buffers, int64_t* tracked);

}  // namespace train
