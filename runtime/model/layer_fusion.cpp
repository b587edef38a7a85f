#include "runtime/model/layer_fusion.h"

namespace train::model {

std::vector<LayerFusion> plan_layer_fusion(const ResNetSpec& spec) {
  std::vector<LayerFusion> plan(spec.layers.size());
  const auto activations = static_cast<size_t>(spec.activation_count);
  // consumers[a]: the layers that read activation a.
  std::vector<std::vector<int>> consumers(activations);
  std::vector<int> producer(activations, -1);
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const auto& layer = spec.layers[l];
    consumers[static_cast<size_t>(layer.input)].push_back(static_cast<int>(l));
    if (layer.input_b >= 0) consumers[static_cast<size_t>(layer.input_b)].push_back(static_cast<int>(l));
    producer[static_cast<size_t>(layer.output)] = static_cast<int>(l);
  }
  // The layer that alone reads the output of layer l, if it is of `kind`.
  auto sole_consumer = [&](int l, LayerKind kind) {
    const auto& readers = consumers[static_cast<size_t>(spec.layers[static_cast<size_t>(l)].output)];
    return readers.size() == 1 && spec.layers[static_cast<size_t>(readers[0])].kind == kind ? readers[0] : -1;
  };
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const auto& layer = spec.layers[l];
    auto& state = plan[l];
    if (layer.kind == LayerKind::residual_add) {
      // Operand x of the add may use the add's output gradient as its own when nothing can write into that
      // buffer while another reader still needs it: x has no other reader, or every other reader of x
      // comes before the producer of the other operand (so its backward, which adds into x's gradient,
      // runs after that producer's backward has read the shared gradient).
      auto may_share = [&](int x, int other) {
        const int other_producer = producer[static_cast<size_t>(other)];
        for (int reader : consumers[static_cast<size_t>(x)]) {
          if (reader != static_cast<int>(l) && reader > other_producer) return false;
        }
        return true;
      };
      state.share_gradient_a = may_share(layer.input, layer.input_b);
      state.share_gradient_b = may_share(layer.input_b, layer.input);
      const int relu = sole_consumer(static_cast<int>(l), LayerKind::relu);
      const int bn = producer[static_cast<size_t>(layer.input)];
      if (relu >= 0 && bn >= 0 && spec.layers[static_cast<size_t>(bn)].kind == LayerKind::batch_norm &&
          sole_consumer(bn, LayerKind::residual_add) == static_cast<int>(l) &&
          plan[static_cast<size_t>(bn)].fusion == Fusion::none) {
        state.fusion = Fusion::bn_add_relu;
        state.partner = bn;
        state.relu_layer = relu;
        plan[static_cast<size_t>(bn)].fusion = Fusion::bn_in_add;
        plan[static_cast<size_t>(bn)].partner = static_cast<int>(l);
        plan[static_cast<size_t>(relu)].fusion = Fusion::relu_in_add;
        plan[static_cast<size_t>(relu)].partner = static_cast<int>(l);
      }
    } else if (layer.kind == LayerKind::batch_norm) {
      const int relu = sole_consumer(static_cast<int>(l), LayerKind::relu);
      if (relu >= 0) {
        state.fusion = Fusion::bn_relu;
        state.partner = relu;
        state.relu_layer = relu;
        plan[static_cast<size_t>(relu)].fusion = Fusion::relu_in_bn;
        plan[static_cast<size_t>(relu)].partner = static_cast<int>(l);
      }
    }
  }
  return plan;
}

}  // namespace train::model
