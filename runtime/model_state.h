// Crossing between a CpuResNet and torchvision-named tensors: model files, checkpoints, the `model`
// channel and the PyTorch comparison all speak torchvision's names and OIHW convolution weights.
#pragma once

#include "cpu_resnet.h"
#include "model_io/initial_weights.h"
#include "model_io/tensor.h"

#include <deque>
#include <string>
#include <vector>

namespace train {

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

// Every parameter and buffer in torchvision's state_dict order and shapes (conv weights OIHW), as F32
// for a float model and F64 for a double one.
template <typename T>
ExportedTensors export_model_state(CpuResNet<T>& model);
// Every parameter's gradient, named `prefix` + the parameter's name, in torchvision's shape.
template <typename T>
ExportedTensors export_gradients(CpuResNet<T>& model, const std::string& prefix);

// What the model expects of a weights file (for model_io::select_initial_weights).
std::vector<model_io::ExpectedTensor> expected_tensors(const ResNetSpec& spec);

// Loads the given torchvision-named tensors into the model (conv weights converted to OHWI). Tensors the
// model has but `tensors` lacks keep their values. Throws std::invalid_argument on a shape mismatch.
template <typename T>
void import_model_state(CpuResNet<T>& model, const std::vector<model_io::Tensor>& tensors);

// Conv weights between OHWI (ours) and OIHW (torchvision's), any element type.
template <typename T>
std::vector<T> convert_conv_layout(const std::vector<T>& source, const std::vector<int64_t>& oihw_shape,
                                   bool to_oihw);

}  // namespace train
