#include "runtime/model/cpu_resnet.h"

#include "kernels/ops.h"

#include <algorithm>

namespace train::model {

template <typename T>
CpuResNet<T>::CpuResNet(ResNetPlan plan, comm::GradientViews<T> gradients)
    : Passes(std::move(plan), *gradients.plan), gradients_(gradients.values) {
  const ResNetPlan& p = this->plan_;
  values_.assign(p.parameter_elements, T(0));
  momentum_.assign(p.parameter_elements, T(0));
  float_buffers_.assign(p.float_buffer_elements, T(0));
  input_ = allocate<T>(static_cast<size_t>(p.max_shapes[0].size()));
  saved_ = this->template allocate_storage<T>();
}

template <typename T>
void CpuResNet<T>::initialize(uint64_t seed) {
  initialize_resnet(this->plan_, seed, values_.data(), float_buffers_.data(), this->tracked_.data());
  std::fill(momentum_.begin(), momentum_.end(), T(0));
}

// The table is built for each step (a few hundred entries): the values may have been replaced since.
template <typename T>
void CpuResNet<T>::sgd_step(const kernels::SgdOptions& options) {
  const std::vector<kernels::SgdTensor<T>> tensors =
      this->template optimizer_tensors<kernels::SgdTensor<T>>(values_.data(), gradients_, momentum_.data());
  kernels::sgd_step<T>(tensors, options);
}

template <typename T>
ExportedTensors CpuResNet<T>::export_state() const {
  return export_model_state(this->plan_, values_.data(), float_buffers_.data(), this->tracked_.data());
}

template <typename T>
void CpuResNet<T>::import_state(const std::vector<model_io::Tensor>& tensors) {
  import_model_state(this->plan_, tensors, values_.data(), float_buffers_.data(), this->tracked_.data());
}

template <typename T>
void CpuResNet<T>::bn_forward_train(size_t l, int64_t rows, int channels, const T* x, const T* shortcut, bool relu,
                                    T* y) {
  const LayerPlan& layer = this->plan_.layers[l];
  const auto& saved = saved_[l];
  if (relu) {
    kernels::batch_norm_relu_forward_train(
        rows, channels, x, shortcut, parameter_data(layer.weight), parameter_data(layer.bias), T(bn_epsilon),
        T(bn_momentum), buffer_data(layer.running_mean), buffer_data(layer.running_var), y, saved.mean, saved.invstd);
  } else {
    kernels::batch_norm_forward_train(rows, channels, x, parameter_data(layer.weight), parameter_data(layer.bias),
                                      T(bn_epsilon), T(bn_momentum), buffer_data(layer.running_mean),
                                      buffer_data(layer.running_var), y, saved.mean, saved.invstd);
  }
}

template <typename T>
void CpuResNet<T>::bn_backward(size_t l, int64_t rows, int channels, const T* x, const T* relu_y, const T* dy, T* dx) {
  const LayerPlan& layer = this->plan_.layers[l];
  const auto& saved = saved_[l];
  if (relu_y != nullptr) {
    kernels::batch_norm_relu_backward(rows, channels, x, relu_y, dy, parameter_data(layer.weight), saved.mean,
                                      saved.invstd, dx, gradient_data(layer.weight), gradient_data(layer.bias));
  } else {
    kernels::batch_norm_backward(rows, channels, x, dy, parameter_data(layer.weight), saved.mean, saved.invstd, dx,
                                 gradient_data(layer.weight), gradient_data(layer.bias));
  }
}

template <typename T>
void CpuResNet<T>::infer(const T* images, int batch, T* logits) {
  this->forward(images, batch, /*training=*/false);
  std::copy(this->logits(), this->logits() + int64_t{batch} * this->spec().num_classes, logits);
}

template <typename T>
typename CpuResNet<T>::StepResult CpuResNet<T>::forward_and_loss(const T* images, const int32_t* labels, int batch,
                                                                  T label_smoothing, T gradient_scale) {
  this->forward(images, batch, /*training=*/true);
  StepResult result;
  const int classes = this->spec().num_classes;
  const T* logits = this->logits();
  for (int i = 0; i < batch; ++i) {
    const T* row = logits + int64_t{i} * classes;
    result.correct += (std::max_element(row, row + classes) - row) == labels[i] ? 1 : 0;
  }
  T* dlogits = this->begin_backward();
  result.loss = kernels::softmax_cross_entropy(batch, classes, logits, labels, label_smoothing, dlogits);
  for (int64_t i = 0; i < int64_t{batch} * classes; ++i) dlogits[i] *= gradient_scale;
  return result;
}

template class CpuResNet<float>;
template class CpuResNet<double>;

}  // namespace train::model
