#include "runtime/model/model_state.h"

#include "runtime/model_io/layout.h"

#include <fmt/format.h>

#include <map>
#include <stdexcept>

namespace train::model {

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

// A tensor of ours as torchvision lays it out, and back.
template <typename T>
std::vector<T> to_torchvision(const TensorSpec& tensor, const T* values) {
  std::vector<T> copy(values, values + tensor.elements());
  return tensor.role == TensorRole::conv_weight ? convert_conv_layout(copy, tensor.shape, true) : copy;
}

void check_shape(const TensorSpec& spec, const model_io::Tensor& tensor) {
  if (tensor.shape != spec.shape) {
    throw std::invalid_argument(fmt::format("{}: shape {} where the model has {}", spec.name,
                                            model_io::shape_text(tensor.shape), model_io::shape_text(spec.shape)));
  }
}

template <typename T>
std::vector<T> from_torchvision(const TensorSpec& spec, const model_io::Tensor& tensor) {
  check_shape(spec, tensor);
  std::vector<T> values;
  if (tensor.dtype == model_io::Dtype::F64) {
    const auto* begin = reinterpret_cast<const double*>(tensor.data.data());
    values.assign(begin, begin + tensor.elements());
  } else {
    std::vector<float> as_float = tensor.to_float();
    values.assign(as_float.begin(), as_float.end());
  }
  return spec.role == TensorRole::conv_weight ? convert_conv_layout(values, spec.shape, false) : values;
}

std::map<std::string, const model_io::Tensor*> by_name(const std::vector<model_io::Tensor>& tensors) {
  std::map<std::string, const model_io::Tensor*> result;
  for (const auto& tensor : tensors) result[tensor.name] = &tensor;
  return result;
}

std::map<int, const ParameterSlot*> parameters_by_spec_index(const ResNetPlan& plan) {
  std::map<int, const ParameterSlot*> result;
  for (const auto& slot : plan.parameters) result[slot.spec_index] = &slot;
  return result;
}

}  // namespace

template <typename T>
ExportedTensors export_model_state(const ResNetPlan& plan, const T* parameters, const T* float_buffers,
                                   const int64_t* tracked) {
  ExportedTensors exported;
  const auto parameter_of_spec = parameters_by_spec_index(plan);
  for (size_t i = 0; i < plan.spec.tensors.size(); ++i) {
    const auto& tensor = plan.spec.tensors[i];
    if (tensor.role == TensorRole::bn_batches_tracked) {
      exported.add_int64(tensor.name, tracked[plan.buffer_offset[i]]);
    } else {
      const T* values = tensor.is_parameter() ? parameters + parameter_of_spec.at(static_cast<int>(i))->offset
                                              : float_buffers + plan.buffer_offset[i];
      exported.add(tensor.name, tensor.shape, to_torchvision(tensor, values));
    }
  }
  return exported;
}

template <typename T>
void import_model_state(const ResNetPlan& plan, const std::vector<model_io::Tensor>& tensors, T* parameters,
                        T* float_buffers, int64_t* tracked) {
  const auto named = by_name(tensors);
  const auto parameter_of_spec = parameters_by_spec_index(plan);
  for (size_t i = 0; i < plan.spec.tensors.size(); ++i) {
    const auto& spec = plan.spec.tensors[i];
    auto found = named.find(spec.name);
    if (found == named.end()) continue;
    if (spec.role == TensorRole::bn_batches_tracked) {
      check_shape(spec, *found->second);
      tracked[plan.buffer_offset[i]] = found->second->to_int64().at(0);
      continue;
    }
    std::vector<T> values = from_torchvision<T>(spec, *found->second);
    T* target = spec.is_parameter() ? parameters + parameter_of_spec.at(static_cast<int>(i))->offset
                                    : float_buffers + plan.buffer_offset[i];
    std::copy(values.begin(), values.end(), target);
  }
}

ExportedTensors export_momentum(const ResNetPlan& plan, const float* momentum) {
  ExportedTensors exported;
  for (const auto& slot : plan.parameters) {
    const auto& tensor = plan.spec.tensors[static_cast<size_t>(slot.spec_index)];
    exported.add(tensor.name, tensor.shape, to_torchvision(tensor, momentum + slot.offset));
  }
  return exported;
}

void import_momentum(const ResNetPlan& plan, const std::vector<model_io::Tensor>& tensors, float* momentum) {
  const auto named = by_name(tensors);
  for (const auto& slot : plan.parameters) {
    const auto& spec = plan.spec.tensors[static_cast<size_t>(slot.spec_index)];
    auto found = named.find(spec.name);
    if (found == named.end()) continue;
    std::vector<float> values = from_torchvision<float>(spec, *found->second);
    std::copy(values.begin(), values.end(), momentum + slot.offset);
  }
}

template <typename T>
ExportedTensors export_gradients(const ResNetPlan& plan, const comm::BucketPlan& buckets, const T* gradients,
                                 const std::string& prefix) {
  ExportedTensors exported;
  for (int p = 0; p < plan.parameter_tensors(); ++p) {
    const auto& tensor = plan.parameter_spec(p);
    exported.add(prefix + tensor.name, tensor.shape,
                 to_torchvision(tensor, gradients + buckets.offset_of_tensor[static_cast<size_t>(p)]));
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

template std::vector<float> convert_conv_layout(const std::vector<float>&, const std::vector<int64_t>&, bool);
template std::vector<double> convert_conv_layout(const std::vector<double>&, const std::vector<int64_t>&, bool);
template ExportedTensors export_model_state(const ResNetPlan&, const float*, const float*, const int64_t*);
template ExportedTensors export_model_state(const ResNetPlan&, const double*, const double*, const int64_t*);
template void import_model_state(const ResNetPlan&, const std::vector<model_io::Tensor>&, float*, float*, int64_t*);
template void import_model_state(const ResNetPlan&, const std::vector<model_io::Tensor>&, double*, double*, int64_t*);
template ExportedTensors export_gradients(const ResNetPlan&, const comm::BucketPlan&, const float*, const std::string&);
template ExportedTensors export_gradients(const ResNetPlan&, const comm::BucketPlan&, const double*,
                                          const std::string&);

}  // namespace train::model
