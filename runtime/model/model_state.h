// Crossing between a model's flat stores (laid out by its ResNetPlan) and torchvision-named tensors: model
// files, checkpoints, the `model` channel and the PyTorch comparison all speak torchvision's names and
// OIHW convolution weights; our stores keep convolution weights OHWI. Written once for both models: each
// passes its host copies of the stores.
#pragma once

#include "runtime/comm/gradient_buckets.h"
#include "runtime/model/resnet_plan.h"
#include "runtime/model_io/initial_weights.h"
#include "runtime/model_io/tensor.h"

#include <deque>
#include <string>
#include <vector>

namespace train::model {

// Tensors converted for a file, with the storage their views point into.
class ExportedTensors {
 public:
  const std::vector<model_io::TensorView>& views() const { return views_; }
  void add(std::string name, std::vector<int64_t> shape, std::vector<float> values);
  void add(std::string name, std::vector<int64_t> shape, std::vector<double> values);
  void add_int64(std::string name, int64_t value);

 private:
  // deques: adding never moves the storage earlier views point into
  std::deque<std::vector<float>> floats_;
  std::deque<std::vector<double>> doubles_;
  std::deque<int64_t> integers_;
  std::vector<model_io::TensorView> views_;
};

// A model's whole state on the host, laid out by its ResNetPlan: what crosses between backends and
// between a device model and files.
struct HostModelState {
  std::vector<float> parameters;     // plan.parameter_elements, conv weights OHWI
  std::vector<float> float_buffers;  // plan.float_buffer_elements: every BN's running_mean and running_var
  std::vector<int64_t> tracked;      // plan.tracked_buffers: every BN's num_batches_tracked
};

// Every parameter and buffer in torchvision's state_dict order and shapes (conv weights OIHW), as F32 for
// float stores and F64 for double ones. `parameters`, `float_buffers` and `tracked` are laid out by `plan`.
template <typename T>
ExportedTensors export_model_state(const ResNetPlan& plan, const T* parameters, const T* float_buffers,
                                   const int64_t* tracked);

// Loads the torchvision-named tensors into the stores (conv weights converted to OHWI). What `tensors`
// lacks keeps its value. Throws std::invalid_argument on a shape mismatch.
template <typename T>
void import_model_state(const ResNetPlan& plan, const std::vector<model_io::Tensor>& tensors, T* parameters,
                        T* float_buffers, int64_t* tracked);

// The optimizer's momentum (laid out as the parameters) under the parameters' names and shapes, and back:
// what checkpoints hold. import_momentum leaves a parameter without a tensor untouched (a checkpoint
// written before the first step has none).
ExportedTensors export_momentum(const ResNetPlan& plan, const float* momentum);
void import_momentum(const ResNetPlan& plan, const std::vector<model_io::Tensor>& tensors, float* momentum);

// Every parameter's gradient (a flat buffer laid out by `buckets`), named `prefix` + the parameter's name,
// in torchvision's shape.
template <typename T>
ExportedTensors export_gradients(const ResNetPlan& plan, const comm::BucketPlan& buckets, const T* gradients,
                                 const std::string& prefix);

// What the model expects of a weights file (for model_io::select_initial_weights).
std::vector<model_io::ExpectedTensor> expected_tensors(const ResNetSpec& spec);

// Conv weights between OHWI (ours) and OIHW (torchvision's), any element type.
template <typename T>
std::vector<T> convert_conv_layout(const std::vector<T>& source, const std::vector<int64_t>& oihw_shape,
                                   bool to_oihw);

}  // namespace train::model
