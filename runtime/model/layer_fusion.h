// Which layers of a ResNetSpec run fused in training, decided from the spec alone so that the CPU and GPU
// models run exactly the same fused layers: a batch norm followed by its ReLU is one op (batch_norm_relu_*),
// and so is the end of a residual block, batch norm + add + ReLU (its forward only: the gradient at the
// add is needed by both operands, so it is stored once and shared, not copied, where that is safe).
#pragma once

#include "runtime/model/resnet_spec.h"

#include <vector>

namespace train::model {

enum class Fusion {
  none,
  bn_relu,      // a batch norm writing its ReLU's output (`partner` is the relu layer)
  relu_in_bn,   // a relu done by its batch norm: nothing to do
  bn_in_add,    // a batch norm whose forward runs at its residual add (`partner`)
  bn_add_relu,  // a residual add running its operand's batch norm (`partner`), the add and the ReLU
  relu_in_add,  // a relu whose forward ran at the add before it; its backward runs as usual
};

struct LayerFusion {
  Fusion fusion = Fusion::none;
  int partner = -1;     // the layer it is fused with (for bn_add_relu: the BN)
  int relu_layer = -1;  // bn_relu, bn_add_relu: the relu whose output it writes
  // residual_add: which operands may take the output's gradient buffer as theirs instead of a copy.
  bool share_gradient_a = false, share_gradient_b = false;
};

// One entry per layer of spec.layers.
std::vector<LayerFusion> plan_layer_fusion(const ResNetSpec& spec);

}  // namespace train::model
