#include "model_state.h"

#include "model_io/layout.h"

#include <fmt/format.h>

#include <map>
#include <stdexcept>

namespace train {

void ExportedTensors::add(std::string name, std::vector<int64_t> shape, std::vector<float> values) {
  floats_.push_back(std::move(values));
  views_.push_back({std::move(name), model_io::Dtype::F32, std::move(shape), floats_.back().data()});
}

void ExportedTensors::add(std::string name, std::vector<int64_t> shape, std::vector<double> values) {
  doubles_.push_back(std::move(values));
  views_.push_back({std::move(name), model_io::Dtype::F64, std::move(shape), doubles_.back().data()});
}

void ExportedTensors::add_int64(std::string name, int64_t value) {
  integers_.push_back(value);
  views_.push_back({std::move(name), model_io::Dtype::I64, {}, &integers_.back()});
}

template <typename T>
std::vector<T> convert_conv_layout(const std::vector<T>& source, const std::vector<int64_t>& oihw_shape,
                                   bool to_oihw) {
  const auto shape = model_io::ConvWeightShape::from_oihw(oihw_shape);
  return to_oihw ? model_io::ohwi_to_oihw(source, shape) : model_io::oihw_to_ohwi(source, shape);
}

namespace {

template <typename T>
std::vector<T> torchvision_layout(const TensorSpec& tensor, const T* values) {
  std::vector<T> copy(values, values + tensor.elements());
  return tensor.role == TensorRole::conv_weight ? convert_conv_layout(copy, tensor.shape, true) : copy;
}

template <typename T>
std::map<int, int> parameters_by_spec_index(const CpuResNet<T>& model) {
  std::map<int, int> result;
  for (int p = 0; p < model.parameter_tensors(); ++p) result[model.parameters()[static_cast<size_t>(p)].spec_index] = p;
  return result;
}

}  // namespace

template <typename T>
ExportedTensors export_model_state(CpuResNet<T>& model) {
  ExportedTensors exported;
  auto parameter_of_spec = parameters_by_spec_index(model);
  const auto& tensors = model.spec().tensors;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& tensor = tensors[i];
    const int index = static_cast<int>(i);
    if (tensor.role == TensorRole::bn_batches_tracked) {
      exported.add_int64(tensor.name, model.batches_tracked(index));
    } else {
      const T* values = tensor.is_parameter() ? model.parameter_data(parameter_of_spec.at(index)) : model.buffer_data(index);
      exported.add(tensor.name, tensor.shape, torchvision_layout(tensor, values));
    }
  }
  return exported;
}

template <typename T>
ExportedTensors export_gradients(CpuResNet<T>& model, const std::string& prefix) {
  ExportedTensors exported;
  for (int p = 0; p < model.parameter_tensors(); ++p) {
    const auto& tensor = model.spec().tensors[static_cast<size_t>(model.parameters()[static_cast<size_t>(p)].spec_index)];
    exported.add(prefix + tensor.name, tensor.shape, torchvision_layout(tensor, model.gradient_data(p)));
  }
  return exported;
}

std::vector<model_io::ExpectedTensor> expected_tensors(const ResNetSpec& spec) {
  std::vector<model_io::ExpectedTensor> expected;
  for (const auto& tensor : spec.tensors) {
    expected.push_back({tensor.name, tensor.shape,
                        tensor.role == TensorRole::bn_batches_tracked ? model_io::Dtype::I64 : model_io::Dtype::F32});
  }
  return expected;
}

template <typename T>
void import_model_state(CpuResNet<T>& model, const std::vector<model_io::Tensor>& tensors) {
  std::map<std::string, const model_io::Tensor*> by_name;
  for (const auto& tensor : tensors) by_name[tensor.name] = &tensor;
  auto parameter_of_spec = parameters_by_spec_index(model);
  const auto& specs = model.spec().tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& spec = specs[i];
    const int index = static_cast<int>(i);
    auto found = by_name.find(spec.name);
    if (found == by_name.end()) continue;
    const model_io::Tensor& tensor = *found->second;
    if (tensor.shape != spec.shape) {
      throw std::invalid_argument(fmt::format("{}: shape {} where the model has {}", spec.name,
                                              model_io::shape_text(tensor.shape), model_io::shape_text(spec.shape)));
    }
    if (spec.role == TensorRole::bn_batches_tracked) {
      model.batches_tracked(index) = tensor.to_int64().at(0);
      continue;
    }
    std::vector<T> values;
    if (tensor.dtype == model_io::Dtype::F64) {
      const auto* begin = reinterpret_cast<const double*>(tensor.data.data());
      values.assign(begin, begin + tensor.elements());
    } else {
      std::vector<float> as_float = tensor.to_float();
      values.assign(as_float.begin(), as_float.end());
    }
    if (spec.role == TensorRole::conv_weight) values = convert_conv_layout(values, spec.shape, false);
    T* target = spec.is_parameter() ? model.parameter_data(parameter_of_spec.at(index)) : model.buffer_data(index);
    std::copy(values.begin(), values.end(), target);
  }
}

template std::vector<float> convert_conv_layout(const std::vector<float>&, const std::vector<int64_t>&, bool);
template std::vector<double> convert_conv_layout(const std::vector<double>&, const std::vector<int64_t>&, bool);
template ExportedTensors export_model_state(CpuResNet<float>&);
template ExportedTensors export_model_state(CpuResNet<double>&);
template ExportedTensors export_gradients(CpuResNet<float>&, const std::string&);
template ExportedTensors export_gradients(CpuResNet<double>&, const std::string&);
template void import_model_state(CpuResNet<float>&, const std::vector<model_io::Tensor>&);
template void import_model_state(CpuResNet<double>&, const std::vector<model_io::Tensor>&);

}  // namespace train
