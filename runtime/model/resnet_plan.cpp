#include "runtime/model/resnet_plan.h"

#include "kernels/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

namespace train {

std::vector<size_t> ResNetPlan::parameter_counts() const {
  std::vector<size_t> counts;
  counts.reserve(parameters.size());
  for (const auto& parameter : parameters) counts.push_back(static_cast<size_t>(parameter.count));
  return counts;
}

std::vector<ActivationShape> ResNetPlan::shapes_at(int batch) const {
  if (batch < 1 || batch > max_batch) {
    throw std::invalid_argument(fmt::format("batch of {} images; this model holds 1 to {}", batch, max_batch));
  }
  std::vector<ActivationShape> shapes = max_shapes;
  for (auto& shape : shapes) shape.n = batch;
  return shapes;
}

namespace {

// Parameters in forward order into one flat store; BN buffers into the float buffers or the counters.
void lay_out_tensors(ResNetPlan& plan) {
  plan.buffer_offset.assign(plan.spec.tensors.size(), 0);
  for (size_t i = 0; i < plan.spec.tensors.size(); ++i) {
    const auto& tensor = plan.spec.tensors[i];
    if (tensor.is_parameter()) {
      plan.parameters.push_back(ParameterSlot{static_cast<int>(i), plan.parameter_elements, tensor.elements()});
      plan.parameter_elements += static_cast<size_t>(tensor.elements());
    } else if (tensor.role == TensorRole::bn_batches_tracked) {
      plan.buffer_offset[i] = plan.tracked_buffers++;
    } else {
      plan.buffer_offset[i] = plan.float_buffer_elements;
      plan.float_buffer_elements += static_cast<size_t>(tensor.elements());
    }
  }
}

// Every layer's parameters and buffers by name, and every activation's shape at the largest batch.
void plan_layers(ResNetPlan& plan) {
  std::map<std::string, int> spec_index;
  std::vector<int> parameter_of_spec(plan.spec.tensors.size(), -1);
  for (size_t i = 0; i < plan.spec.tensors.size(); ++i) spec_index[plan.spec.tensors[i].name] = static_cast<int>(i);
  for (size_t p = 0; p < plan.parameters.size(); ++p) {
    parameter_of_spec[static_cast<size_t>(plan.parameters[p].spec_index)] = static_cast<int>(p);
  }
  auto parameter = [&](const std::string& name) {
    auto it = spec_index.find(name);
    if (it == spec_index.end() || parameter_of_spec[static_cast<size_t>(it->second)] < 0) {
      throw std::logic_error("ResNet spec lacks parameter " + name);
    }
    return parameter_of_spec[static_cast<size_t>(it->second)];
  };
  auto buffer = [&](const std::string& name) { return spec_index.at(name); };

  const std::vector<LayerFusion> fusion = plan_layer_fusion(plan.spec);
  plan.max_shapes.assign(static_cast<size_t>(plan.spec.activation_count), {});
  plan.max_shapes[0] = {plan.max_batch, plan.height, plan.width, 3};
  plan.layers.resize(plan.spec.layers.size());
  for (size_t l = 0; l < plan.spec.layers.size(); ++l) {
    const auto& layer = plan.spec.layers[l];
    auto& entry = plan.layers[l];
    static_cast<LayerFusion&>(entry) = fusion[l];
    const ActivationShape in = plan.max_shapes[static_cast<size_t>(layer.input)];
    ActivationShape out = in;
    switch (layer.kind) {
      case LayerKind::conv: {
        auto shape = ops::Conv2dShape::square(in.n, in.h, in.w, in.c, layer.out_channels, layer.kernel, layer.stride,
                                              layer.padding);
        out = {in.n, shape.out_h(), shape.out_w(), layer.out_channels};
        entry.weight = parameter(layer.name + ".weight");
        break;
      }
      case LayerKind::batch_norm:
        entry.weight = parameter(layer.name + ".weight");
        entry.bias = parameter(layer.name + ".bias");
        entry.running_mean = buffer(layer.name + ".running_mean");
        entry.running_var = buffer(layer.name + ".running_var");
        entry.tracked = buffer(layer.name + ".num_batches_tracked");
        plan.max_bn_channels = std::max(plan.max_bn_channels, in.c);
        break;
      case LayerKind::max_pool: {
        ops::Pool2dShape pool{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding};
        out = {in.n, pool.out_h(), pool.out_w(), in.c};
        break;
      }
      case LayerKind::global_avg_pool: out = {in.n, 1, 1, in.c}; break;
      case LayerKind::fully_connected:
        out = {in.n, 1, 1, layer.out_channels};
        entry.weight = parameter(layer.name + ".weight");
        entry.bias = parameter(layer.name + ".bias");
        break;
      case LayerKind::relu:
      case LayerKind::residual_add: break;
    }
    if (out.h < 1 || out.w < 1) {
      throw std::invalid_argument(fmt::format("input {}x{} is too small for resnet{}: layer {} would have no output",
                                              plan.height, plan.width, plan.spec.depth, layer.name));
    }
    plan.max_shapes[static_cast<size_t>(layer.output)] = out;
  }
}

// Which activations share storage and which need a gradient (the header says why).
void plan_storage(ResNetPlan& plan) {
  const size_t activations = plan.max_shapes.size();
  plan.storage_of.resize(activations);
  for (size_t a = 0; a < activations; ++a) plan.storage_of[a] = static_cast<int>(a);
  plan.gradient_needed.assign(activations, true);
  plan.gradient_needed[0] = false;  // the images
  for (size_t l = 0; l < plan.spec.layers.size(); ++l) {
    const auto& entry = plan.layers[l];
    const auto output = static_cast<size_t>(plan.spec.layers[l].output);
    if (entry.fusion == Fusion::bn_relu) {
      plan.storage_of[output] = plan.spec.layers[static_cast<size_t>(entry.relu_layer)].output;
      plan.gradient_needed[output] = false;  // its backward takes the gradient at the ReLU's output
    } else if (entry.fusion == Fusion::bn_in_add) {
      const auto& add = plan.layers[static_cast<size_t>(entry.partner)];
      plan.storage_of[output] = plan.spec.layers[static_cast<size_t>(add.relu_layer)].output;
    } else if (entry.fusion == Fusion::bn_add_relu) {
      plan.storage_of[output] = plan.spec.layers[static_cast<size_t>(entry.relu_layer)].output;
    }
  }
  for (size_t a = 1; a < activations; ++a) {
    const auto target = static_cast<size_t>(plan.storage_of[a]);
    if (plan.storage_of[target] != static_cast<int>(target) || plan.max_shapes[target].size() != plan.max_shapes[a].size()) {
      throw std::logic_error("ResNet plan: an activation's storage is not an activation of its own shape");
    }
    plan.largest_activation = std::max(plan.largest_activation, plan.max_shapes[a].size());
  }
}

}  // namespace

ResNetPlan plan_resnet(ResNetSpec spec, int max_batch, int height, int width) {
  if (max_batch < 2) throw std::invalid_argument("batch norm in training mode needs at least 2 images per rank");
  ResNetPlan plan;
  plan.spec = std::move(spec);
  plan.max_batch = max_batch;
  plan.height = height;
  plan.width = width;
  lay_out_tensors(plan);
  plan_layers(plan);
  plan_storage(plan);
  return plan;
}

template <typename T>
void initialize_resnet(const ResNetPlan& plan, uint64_t seed, T* parameters, T* float_buffers, int64_t* tracked) {
  std::mt19937_64 generator(seed);
  for (const auto& slot : plan.parameters) {
    const auto& tensor = plan.spec.tensors[static_cast<size_t>(slot.spec_index)];
    T* values = parameters + slot.offset;
    switch (tensor.role) {
      case TensorRole::conv_weight: {
        // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 / (out * kh * kw)).
        double fan_out = static_cast<double>(tensor.shape[0] * tensor.shape[2] * tensor.shape[3]);
        std::normal_distribution<float> normal(0.0f, static_cast<float>(std::sqrt(2.0 / fan_out)));
        for (int64_t i = 0; i < slot.count; ++i) values[i] = static_cast<T>(normal(generator));
        break;
      }
      case TensorRole::bn_weight: std::fill(values, values + slot.count, T(1)); break;
      case TensorRole::bn_bias: std::fill(values, values + slot.count, T(0)); break;
      case TensorRole::fc_weight:
      case TensorRole::fc_bias: {
        // nn.Linear's default: kaiming_uniform_(a=sqrt(5)) and the bias alike: U(-1/sqrt(in), 1/sqrt(in)).
        const double fan_in = static_cast<double>(plan.spec.layers.back().in_channels);
        float bound = static_cast<float>(1.0 / std::sqrt(fan_in));
        std::uniform_real_distribution<float> uniform(-bound, bound);
        for (int64_t i = 0; i < slot.count; ++i) values[i] = static_cast<T>(uniform(generator));
        break;
      }
      default: break;
    }
  }
  for (size_t i = 0; i < plan.spec.tensors.size(); ++i) {
    const auto& tensor = plan.spec.tensors[i];
    T* buffer = float_buffers + plan.buffer_offset[i];
    if (tensor.role == TensorRole::bn_running_mean) std::fill_n(buffer, tensor.elements(), T(0));
    if (tensor.role == TensorRole::bn_running_var) std::fill_n(buffer, tensor.elements(), T(1));
    if (tensor.role == TensorRole::bn_batches_tracked) tracked[plan.buffer_offset[i]] = 0;
  }
}

template void initialize_resnet(const ResNetPlan&, uint64_t, float*, float*, int64_t*);
template void initialize_resnet(const ResNetPlan&, uint64_t, double*, double*, int64_t*);

}  // namespace train
