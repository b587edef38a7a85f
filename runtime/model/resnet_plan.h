// Everything about a ResNet that both models need, decided once from its ResNetSpec and the largest batch:
// the parameter table (offsets into one flat store, in forward order), where each BN buffer lives, every
// layer's parameters, fusion and shapes, which activations need storage of their own and which need a
// gradient, and the batch-norm constants. CpuResNet and GpuResNet each keep only their storage and their
// op calls (runtime/model/resnet_passes.h walks the layers for both); the gradient buckets are laid out by
// the communication layer from parameter_elements() (runtime/comm/gradient_buckets.h).
#pragma once

#include "runtime/comm/gradient_buckets.h"
#include "runtime/model/layer_fusion.h"
#include "runtime/model/resnet_spec.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace train::model {

// PyTorch's BatchNorm2d defaults, as torchvision's ResNet uses them.
inline constexpr double bn_epsilon = 1e-5;
inline constexpr double bn_momentum = 0.1;

// How activation gradients are stored: a buffer per activation (the reference), or buffers shared by
// gradients whose lifetimes in the backward pass do not overlap (the same values, a fraction of the memory).
enum class GradientMemory { per_activation, shared_by_lifetime };

// Where a layer's backward pass writes a gradient.
struct GradientTarget {
  int buffer = -1;          // a gradient buffer (-1: nothing to write: the images need no gradient)
  bool accumulate = false;  // another reader wrote it earlier this step: compute into scratch, then add
};

// Which gradient buffers a layer's backward reads and writes, decided once by walking the backward pass
// over the plan; the passes follow it (runtime/model/resnet_passes.h).
struct BackwardRoute {
  bool skip = false;        // a ReLU differentiated by its batch norm (Fusion::relu_in_bn)
  int dy = -1;              // the buffer holding the gradient it reads (a bn_relu: the ReLU output's)
  GradientTarget dx;        // its input's gradient
  GradientTarget dx_b;      // a residual add's second operand's
  bool a_takes_dy = false;  // a residual add: the operand's gradient is dy's buffer itself (no copy)
  bool b_takes_dy = false;
};

// An activation: NHWC.
struct ActivationShape {
  int n = 0, h = 0, w = 0, c = 0;
  int64_t size() const { return int64_t{n} * h * w * c; }
};

struct ParameterSlot {
  int spec_index = 0;  // into spec.tensors
  size_t offset = 0;   // into the flat parameter (and momentum) store, forward order, aligned (tensor_alignment_elements)
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
  size_t parameter_elements = 0;             // the flat store's size, the padding between tensors included
  std::vector<size_t> buffer_offset;         // by spec index: into the float buffers, or the tracked counters
  size_t float_buffer_elements = 0;          // running_mean and running_var of every BN
  size_t tracked_buffers = 0;                // num_batches_tracked of every BN
  std::vector<LayerPlan> layers;             // one per spec.layers entry
  std::vector<ActivationShape> max_shapes;   // every activation at max_batch (0: the images, 3 channels)
  // Storage: an activation the fused training pass never writes (a BN output fused into its ReLU or
  // residual add, an add output fused into its ReLU) may share the storage of the ReLU output it is fused
  // into; storage_of[a] names the activation whose storage a uses (a itself when it has its own).
  std::vector<int> storage_of;
  // The backward pass: every layer's route (by layer), the buffer the loss's gradient goes to, and the size
  // of every gradient buffer at max_batch (elements).
  GradientMemory gradient_memory = GradientMemory::per_activation;
  std::vector<BackwardRoute> backward;
  int loss_gradient = -1;
  std::vector<int64_t> gradient_buffers;
  int64_t largest_activation = 0;            // elements of the largest activation (gradient scratch)
  int max_bn_channels = 0;

  int parameter_tensors() const { return static_cast<int>(parameters.size()); }
  int64_t gradient_elements() const;  // all gradient buffers together
  // Elements of every parameter tensor in forward order: what the gradient buckets are planned from.
  std::vector<size_t> parameter_counts() const;
  const TensorSpec& parameter_spec(int p) const { return spec.tensors[static_cast<size_t>(parameters[static_cast<size_t>(p)].spec_index)]; }
  // Every activation's shape at `batch` images (1..max_batch). Throws std::invalid_argument otherwise.
  std::vector<ActivationShape> shapes_at(int batch) const;
};

// Throws std::invalid_argument when max_batch < 2 (batch norm in training needs two values per channel)
// or the input is too small for the network.
ResNetPlan plan_resnet(ResNetSpec spec, int max_batch, int height, int width,
                       GradientMemory gradient_memory = GradientMemory::per_activation);

// torchvision's default initialisation into a flat parameter store and buffers laid out by `plan`:
// convolutions Kaiming-normal (fan_out, ReLU gain), BN weight 1 and bias 0, the classifier uniform in
// +-1/sqrt(fan_in) (weight and bias), running statistics 0 and 1, counters 0. Conv weights are OHWI.
// The same seed gives the same values on every machine with the same build; each tensor's values depend only
// on the seed, the tensor's place in the model and their place in it (resnet_plan.cpp's draw).
template <typename T>
void initialize_resnet(const ResNetPlan& plan, uint64_t seed, T* parameters, T* float_buffers, int64_t* tracked);

}  // namespace train::model
