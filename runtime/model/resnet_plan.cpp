#include "runtime/model/resnet_plan.h"

#include "kernels/ops.h"

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include <boost/random/seed_seq.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

namespace train::model {

int64_t ResNetPlan::gradient_elements() const {
  int64_t total = 0;
  for (int64_t elements : gradient_buffers) total += elements;
  return total;
}

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

// Parameters in forward order into one flat store, each at an aligned offset (the device reads the fp32
// master weights and their bf16 copy at these offsets: runtime/comm/gradient_buckets.h says why); BN
// buffers into the float buffers or the counters.
void lay_out_tensors(ResNetPlan& plan) {
  plan.buffer_offset.assign(plan.spec.tensors.size(), 0);
  for (size_t i = 0; i < plan.spec.tensors.size(); ++i) {
    const auto& tensor = plan.spec.tensors[i];
    if (tensor.is_parameter()) {
      const size_t offset = comm::aligned_tensor_offset(plan.parameter_elements);
      plan.parameters.push_back(ParameterSlot{static_cast<int>(i), offset, tensor.elements()});
      plan.parameter_elements = comm::aligned_tensor_offset(offset + static_cast<size_t>(tensor.elements()));
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
        auto shape = kernels::Conv2dShape::square(in.n, in.h, in.w, in.c, layer.out_channels, layer.kernel,
                                                  layer.stride, layer.padding);
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
        kernels::Pool2dShape pool{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding};
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

// Which activations share storage (the header says why).
void plan_storage(ResNetPlan& plan) {
  const size_t activations = plan.max_shapes.size();
  plan.storage_of.resize(activations);
  for (size_t a = 0; a < activations; ++a) plan.storage_of[a] = static_cast<int>(a);
  for (size_t l = 0; l < plan.spec.layers.size(); ++l) {
    const auto& entry = plan.layers[l];
    const auto output = static_cast<size_t>(plan.spec.layers[l].output);
    if (entry.fusion == Fusion::bn_relu) {
      plan.storage_of[output] = plan.spec.layers[static_cast<size_t>(entry.relu_layer)].output;
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

// The backward pass walked once over the plan, without arithmetic: which gradient each layer reads, where
// it writes its input's (straight into the buffer, or into scratch and added when another reader of that
// input wrote it first), and which residual-add operands take the add's gradient buffer as their own.
// Every activation that receives a gradient starts with a buffer of its own (its index: a "logical"
// buffer); `lifetime` gets, per logical buffer, the first and last backward step that touches it (the
// loss's gradient is written at step -1).
struct Lifetime {
  int first = std::numeric_limits<int>::max(), last = -2;
};

std::vector<Lifetime> route_backward(ResNetPlan& plan) {
  const auto& layers = plan.spec.layers;
  const size_t activations = plan.max_shapes.size();
  // Activations whose gradient backward writes: not the images, not BN outputs whose backward takes the
  // gradient at the ReLU's output.
  std::vector<int> gradient_of(activations, -1);
  for (size_t a = 1; a < activations; ++a) gradient_of[a] = static_cast<int>(a);
  for (size_t l = 0; l < layers.size(); ++l) {
    if (plan.layers[l].fusion == Fusion::bn_relu) gradient_of[static_cast<size_t>(layers[l].output)] = -1;
  }
  std::vector<bool> written(activations, false);
  std::vector<Lifetime> lifetime(activations);
  auto touch = [&](int buffer, int step) {
    auto& span = lifetime[static_cast<size_t>(buffer)];
    span.first = std::min(span.first, step);
    span.last = std::max(span.last, step);
  };
  const size_t last = activations - 1;
  written[last] = true;
  touch(gradient_of[last], -1);
  plan.loss_gradient = gradient_of[last];

  plan.backward.assign(layers.size(), BackwardRoute{});
  int step = 0;
  for (size_t l = layers.size(); l-- > 0;) {
    const auto& layer = layers[l];
    const auto& entry = plan.layers[l];
    auto& route = plan.backward[l];
    if (entry.fusion == Fusion::relu_in_bn) {
      route.skip = true;
      continue;
    }
    const int output = entry.fusion == Fusion::bn_relu ? layers[static_cast<size_t>(entry.relu_layer)].output
                                                       : layer.output;
    if (!written[static_cast<size_t>(output)] || gradient_of[static_cast<size_t>(output)] < 0) {
      throw std::logic_error("ResNet plan: no gradient reaches the output of " + layer.name);
    }
    route.dy = gradient_of[static_cast<size_t>(output)];
    touch(route.dy, step);
    auto target = [&](int activation) {
      const auto a = static_cast<size_t>(activation);
      if (gradient_of[a] < 0) {
        throw std::logic_error("ResNet plan: " + layer.name + " writes the gradient of an activation without one");
      }
      GradientTarget result{gradient_of[a], written[a]};
      written[a] = true;
      touch(result.buffer, step);
      return result;
    };
    if (layer.kind == LayerKind::residual_add) {
      // y = a + b: both operands receive dy; where the fusion plan found it safe, by taking its buffer.
      for (int operand : {layer.input, layer.input_b}) {
        const bool is_a = operand == layer.input;
        const auto o = static_cast<size_t>(operand);
        if ((is_a ? entry.share_gradient_a : entry.share_gradient_b) && !written[o]) {
          gradient_of[o] = route.dy;
          written[o] = true;
          (is_a ? route.a_takes_dy : route.b_takes_dy) = true;
        } else {
          (is_a ? route.dx : route.dx_b) = target(operand);
        }
      }
    } else if (layer.input != 0) {  // the images need no gradient
      route.dx = target(layer.input);
    }
    ++step;
  }
  return lifetime;
}

// Physical gradient buffers for the logical ones: one each, or (shared_by_lifetime) a buffer reused by
// gradients that are never alive in the same backward step, each placed in the smallest free buffer that
// holds it (else the largest free one, grown; else a new one). Returns the physical buffer of each logical.
std::vector<int> assign_gradient_buffers(ResNetPlan& plan, const std::vector<Lifetime>& lifetime) {
  std::vector<int> physical(lifetime.size(), -1);
  std::vector<size_t> order;
  for (size_t id = 0; id < lifetime.size(); ++id) {
    if (lifetime[id].last >= -1) order.push_back(id);  // touched: it holds a gradient at some point
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return lifetime[a].first < lifetime[b].first; });
  std::vector<int> free_after;  // per physical buffer: the last step its current occupant is alive
  for (size_t id : order) {
    const int64_t need = plan.max_shapes[id].size();
    int chosen = -1;
    if (plan.gradient_memory == GradientMemory::shared_by_lifetime) {
      for (size_t b = 0; b < plan.gradient_buffers.size(); ++b) {
        if (free_after[b] >= lifetime[id].first) continue;  // still alive (the same step counts: dy vs dx)
        const int64_t have = plan.gradient_buffers[b];
        if (chosen < 0) {
          chosen = static_cast<int>(b);
          continue;
        }
        const int64_t best = plan.gradient_buffers[static_cast<size_t>(chosen)];
        const bool fits = have >= need, best_fits = best >= need;
        if ((fits && (!best_fits || have < best)) || (!fits && !best_fits && have > best)) chosen = static_cast<int>(b);
      }
    }
    if (chosen < 0) {
      chosen = static_cast<int>(plan.gradient_buffers.size());
      plan.gradient_buffers.push_back(0);
      free_after.push_back(0);
    }
    auto& elements = plan.gradient_buffers[static_cast<size_t>(chosen)];
    elements = std::max(elements, need);
    free_after[static_cast<size_t>(chosen)] = lifetime[id].last;
    physical[id] = chosen;
  }
  return physical;
}

void plan_backward(ResNetPlan& plan) {
  const std::vector<Lifetime> lifetime = route_backward(plan);
  const std::vector<int> physical = assign_gradient_buffers(plan, lifetime);
  auto map = [&](int& buffer) {
    if (buffer >= 0) buffer = physical[static_cast<size_t>(buffer)];
  };
  map(plan.loss_gradient);
  for (auto& route : plan.backward) {
    map(route.dy);
    map(route.dx.buffer);
    map(route.dx_b.buffer);
  }
}

}  // namespace

ResNetPlan plan_resnet(ResNetSpec spec, int max_batch, int height, int width, GradientMemory gradient_memory) {
  if (max_batch < 2) throw std::invalid_argument("batch norm in training mode needs at least 2 images per rank");
  ResNetPlan plan;
  plan.spec = std::move(spec);
  plan.max_batch = max_batch;
  plan.height = height;
  plan.width = width;
  plan.gradient_memory = gradient_memory;
  lay_out_tensors(plan);
  plan_layers(plan);
  plan_storage(plan);
  plan_backward(plan);
  return plan;
}

namespace {

// Each parameter tensor is drawn in chunks of kDrawChunk values, each chunk from a stream of its own (seeded by
// the job's seed, the tensor's index in the model and the chunk's), so a value depends on where it is in its
// tensor, not on the tensors before it, and chunks could be drawn on several threads with the same result.
// Boost's ziggurat normal sampler over a 32-bit Mersenne twister draws 11 M values in about 50 ms on one core,
// a quarter of std::normal_distribution's polar method over mt19937_64 (every rank draws its model at start-up).
constexpr int64_t kDrawChunk = int64_t{1} << 20;

template <typename T, typename Distribution>
void draw(uint64_t seed, size_t tensor_index, T* values, int64_t count, Distribution distribution) {
  for (int64_t start = 0; start < count; start += kDrawChunk) {
    const uint64_t chunk = static_cast<uint64_t>(start / kDrawChunk);
    boost::random::seed_seq sequence{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                                     static_cast<uint32_t>(tensor_index), static_cast<uint32_t>(chunk)};
    boost::random::mt19937 stream(sequence);
    const int64_t end = std::min(count, start + kDrawChunk);
    for (int64_t i = start; i < end; ++i) values[i] = static_cast<T>(distribution(stream));
  }
}

}  // namespace

template <typename T>
void initialize_resnet(const ResNetPlan& plan, uint64_t seed, T* parameters, T* float_buffers, int64_t* tracked) {
  for (const auto& slot : plan.parameters) {
    const size_t index = static_cast<size_t>(slot.spec_index);
    const auto& tensor = plan.spec.tensors[index];
    T* values = parameters + slot.offset;
    switch (tensor.role) {
      case TensorRole::conv_weight: {
        // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 / (out * kh * kw)).
        double fan_out = static_cast<double>(tensor.shape[0] * tensor.shape[2] * tensor.shape[3]);
        draw(seed, index, values, slot.count,
             boost::random::normal_distribution<float>(0.0f, static_cast<float>(std::sqrt(2.0 / fan_out))));
        break;
      }
      case TensorRole::bn_weight: std::fill(values, values + slot.count, T(1)); break;
      case TensorRole::bn_bias: std::fill(values, values + slot.count, T(0)); break;
      case TensorRole::fc_weight:
      case TensorRole::fc_bias: {
        // nn.Linear's default: kaiming_uniform_(a=sqrt(5)) and the bias alike: U(-1/sqrt(in), 1/sqrt(in)).
        const double fan_in = static_cast<double>(plan.spec.layers.back().in_channels);
        float bound = static_cast<float>(1.0 / std::sqrt(fan_in));
        draw(seed, index, values, slot.count, boost::random::uniform_real_distribution<float>(-bound, bound));
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

}  // namespace train::model
