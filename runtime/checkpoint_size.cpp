// The least size of a checkpoint, from the ResNet spec (declared in runtime/rank_main.h for the launcher).
#include "runtime/rank_main.h"

#include "runtime/model/resnet_spec.h"

namespace train {

uint64_t least_checkpoint_bytes(const JobDescription& job) {
  const int classes = job.hyperparameters.num_classes.value_or(1);
  const model::ResNetSpec spec = model::build_resnet_spec(job.hyperparameters.num_layers, classes);
  uint64_t bytes = 0;
  for (const auto& tensor : spec.tensors) {
    const auto elements = static_cast<uint64_t>(tensor.elements());
    if (tensor.role == model::TensorRole::bn_batches_tracked) {
      bytes += 8 * elements;  // int64
    } else {
      bytes += 4 * elements * (tensor.is_parameter() ? 2 : 1);  // float32; a parameter has its momentum too
    }
  }
  return bytes;
}

}  // namespace train
