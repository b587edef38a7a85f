// The ResNet family as torchvision builds it (v1.5: the stride sits on the 3x3 convolution of a
// bottleneck), described as data: the layers in forward order, and every parameter and buffer with
// torchvision's name and shape. The CPU and GPU models both execute this description.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace train::model {

enum class TensorRole {
  conv_weight,      // torchvision shape [out, in, kh, kw]; stored OHWI in memory
  bn_weight,
  bn_bias,
  fc_weight,        // [classes, features]
  fc_bias,
  bn_running_mean,  // buffers from here on
  bn_running_var,
  bn_batches_tracked,  // int64 scalar
};

struct TensorSpec {
  std::string name;            // torchvision's state_dict key, e.g. "layer1.0.conv2.weight"
  std::vector<int64_t> shape;  // torchvision's shape
  TensorRole role;
  bool is_parameter() const { return role <= TensorRole::fc_bias; }
  // Weight decay applies to convolution and fully-connected weights only (not BN, not biases).
  bool decays() const { return role == TensorRole::conv_weight || role == TensorRole::fc_weight; }
  int64_t elements() const;
};

enum class LayerKind { conv, batch_norm, relu, max_pool, residual_add, global_avg_pool, fully_connected };

struct LayerSpec {
  LayerKind kind;
  std::string name;  // "conv1", "layer2.0.bn3", "layer3.1.downsample.0", "fc", ...
  // conv: geometry; batch_norm: channels in `out_channels`; fully_connected: in/out features.
  int in_channels = 0;
  int out_channels = 0;
  int kernel = 1;
  int stride = 1;
  int padding = 0;
  // Activations this layer reads and writes, as indices into the model's activation list; 0 is the input.
  int input = 0;
  int input_b = -1;  // the second operand of residual_add (the shortcut)
  int output = 0;
  int group = 0;  // its layer group (layer_group_name): what the timeline shows forward and backward by
};

// The layer groups of every ResNet, in forward order: the stem (conv1, bn1, relu, maxpool), the four
// stages layer1..layer4, and the head (avgpool, fc).
inline constexpr int layer_groups = 6;
const char* layer_group_name(int group);

struct ResNetSpec {
  int depth = 50;
  int num_classes = 1000;
  std::vector<LayerSpec> layers;   // forward order
  std::vector<TensorSpec> tensors; // parameters and buffers, in torchvision's state_dict order
  int activation_count = 1;        // including the input image

  int64_t parameter_count() const;
  int parameter_tensor_count() const;
};

// depth: 18, 34, 50, 101 or 152. Throws std::invalid_argument for anything else.
ResNetSpec build_resnet_spec(int depth, int num_classes);

}  // namespace train::model
