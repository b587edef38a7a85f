#include "runtime/model/resnet_spec.h"

#include <fmt/format.h>

#include <stdexcept>

namespace train::model {

int64_t TensorSpec::elements() const {
  int64_t count = 1;
  for (auto extent : shape) count *= extent;
  return count;
}

int64_t ResNetSpec::parameter_count() const {
  int64_t count = 0;
  for (const auto& tensor : tensors) {
    if (tensor.is_parameter()) count += tensor.elements();
  }
  return count;
}

int ResNetSpec::parameter_tensor_count() const {
  int count = 0;
  for (const auto& tensor : tensors) count += tensor.is_parameter() ? 1 : 0;
  return count;
}

namespace {

class Builder {
 public:
  explicit Builder(ResNetSpec& spec) : spec_(spec) {}

  int conv(const std::string& name, int input, int in_channels, int out_channels, int kernel, int stride) {
    int output = new_activation();
    spec_.layers.push_back(LayerSpec{LayerKind::conv, name, in_channels, out_channels, kernel, stride, kernel / 2,
                                     input, -1, output});
    spec_.tensors.push_back({name + ".weight", {out_channels, in_channels, kernel, kernel}, TensorRole::conv_weight});
    return output;
  }

  int batch_norm(const std::string& name, int input, int channels) {
    int output = new_activation();
    spec_.layers.push_back(LayerSpec{LayerKind::batch_norm, name, channels, channels, 1, 1, 0, input, -1, output});
    spec_.tensors.push_back({name + ".weight", {channels}, TensorRole::bn_weight});
    spec_.tensors.push_back({name + ".bias", {channels}, TensorRole::bn_bias});
    spec_.tensors.push_back({name + ".running_mean", {channels}, TensorRole::bn_running_mean});
    spec_.tensors.push_back({name + ".running_var", {channels}, TensorRole::bn_running_var});
    spec_.tensors.push_back({name + ".num_batches_tracked", {}, TensorRole::bn_batches_tracked});
    return output;
  }

  int simple(LayerKind kind, const std::string& name, int input, int channels, int input_b = -1) {
    int output = new_activation();
    LayerSpec layer{kind, name, channels, channels, 1, 1, 0, input, input_b, output};
    if (kind == LayerKind::max_pool) {
      layer.kernel = 3;
      layer.stride = 2;
      layer.padding = 1;
    }
    spec_.layers.push_back(layer);
    return output;
  }

  int fully_connected(const std::string& name, int input, int in_features, int out_features) {
    int output = new_activation();
    spec_.layers.push_back(
        LayerSpec{LayerKind::fully_connected, name, in_features, out_features, 1, 1, 0, input, -1, output});
    spec_.tensors.push_back({name + ".weight", {out_features, in_features}, TensorRole::fc_weight});
    spec_.tensors.push_back({name + ".bias", {out_features}, TensorRole::fc_bias});
    return output;
  }

  // torchvision's BasicBlock (expansion 1) or Bottleneck (expansion 4, stride on the 3x3).
  int block(const std::string& name, int input, int in_channels, int planes, int stride, bool bottleneck) {
    const int expansion = bottleneck ? 4 : 1;
    const int out_channels = planes * expansion;
    int x = input;
    if (bottleneck) {
      x = conv(name + ".conv1", x, in_channels, planes, 1, 1);
      x = batch_norm(name + ".bn1", x, planes);
      x = simple(LayerKind::relu, name + ".relu1", x, planes);
      x = conv(name + ".conv2", x, planes, planes, 3, stride);
      x = batch_norm(name + ".bn2", x, planes);
      x = simple(LayerKind::relu, name + ".relu2", x, planes);
      x = conv(name + ".conv3", x, planes, out_channels, 1, 1);
      x = batch_norm(name + ".bn3", x, out_channels);
    } else {
      x = conv(name + ".conv1", x, in_channels, planes, 3, stride);
      x = batch_norm(name + ".bn1", x, planes);
      x = simple(LayerKind::relu, name + ".relu1", x, planes);
      x = conv(name + ".conv2", x, planes, planes, 3, 1);
      x = batch_norm(name + ".bn2", x, planes);
    }
    int shortcut = input;
    if (stride != 1 || in_channels != out_channels) {
      shortcut = conv(name + ".downsample.0", input, in_channels, out_channels, 1, stride);
      shortcut = batch_norm(name + ".downsample.1", shortcut, out_channels);
    }
    x = simple(LayerKind::residual_add, name + ".add", x, out_channels, shortcut);
    return simple(LayerKind::relu, name + ".relu", x, out_channels);
  }

 private:
  int new_activation() { return spec_.activation_count++; }
  ResNetSpec& spec_;
};

}  // namespace

ResNetSpec build_resnet_spec(int depth, int num_classes) {
  std::vector<int> blocks;
  bool bottleneck = true;
  switch (depth) {
    case 18: blocks = {2, 2, 2, 2}; bottleneck = false; break;
    case 34: blocks = {3, 4, 6, 3}; bottleneck = false; break;
    case 50: blocks = {3, 4, 6, 3}; break;
    case 101: blocks = {3, 4, 23, 3}; break;
    case 152: blocks = {3, 8, 36, 3}; break;
    default: throw std::invalid_argument(fmt::format("ResNet depth {} is not one of 18, 34, 50, 101, 152", depth));
  }
  if (num_classes < 1) throw std::invalid_argument("a ResNet needs at least one class");
  ResNetSpec spec;
  spec.depth = depth;
  spec.num_classes = num_classes;
  Builder builder(spec);
  int x = builder.conv("conv1", 0, 3, 64, 7, 2);
  x = builder.batch_norm("bn1", x, 64);
  x = builder.simple(LayerKind::relu, "relu", x, 64);
  x = builder.simple(LayerKind::max_pool, "maxpool", x, 64);
  int channels = 64;
  const int expansion = bottleneck ? 4 : 1;
  for (int stage = 0; stage < 4; ++stage) {
    int planes = 64 << stage;
    for (int index = 0; index < blocks[static_cast<size_t>(stage)]; ++index) {
      int stride = (stage > 0 && index == 0) ? 2 : 1;
      x = builder.block(fmt::format("layer{}.{}", stage + 1, index), x, channels, planes, stride, bottleneck);
      channels = planes * expansion;
    }
  }
  x = builder.simple(LayerKind::global_avg_pool, "avgpool", x, channels);
  builder.fully_connected("fc", x, channels, num_classes);
  // Groups in forward order: the stem until layer1, each stage by its name, the head after layer4.
  int group = 0;
  for (auto& layer : spec.layers) {
    if (layer.name.rfind("layer", 0) == 0) {
      group = layer.name[5] - '0';
    } else if (group > 0) {
      group = layer_groups - 1;
    }
    layer.group = group;
  }
  return spec;
}

const char* layer_group_name(int group) {
  static constexpr const char* names[layer_groups] = {"stem", "layer1", "layer2", "layer3", "layer4", "head"};
  return group >= 0 && group < layer_groups ? names[group] : "?";
}

}  // namespace train::model
