// Weights in: a `model` channel holding model.safetensors starts training from those weights (as the
// built-in image classification algorithm's incremental training). The file comes from a user, so it is
// matched against what the model expects, name by name and shape by shape, before anything is used:
//
// - every tensor the model expects must be there with its shape, except that
//   - the classifier (`fc.weight`, `fc.bias`) may have a different number of classes: then it is
//     re-initialised, and everything else is kept (fine-tuning to new classes);
//   - a BN `num_batches_tracked` may be missing (files saved by PyTorch before 0.4.1, such as torchvision's
//     original ImageNet weights, lack it): it starts at 0;
// - a tensor the model does not have is an error (a different architecture, or a different depth);
// - names saved from a DistributedDataParallel wrapper ("module.conv1.weight") are accepted;
// - float tensors may be F32, F64, F16 or BF16 (converted to F32); integer buffers any integer type
//   (converted to I64).
#pragma once

#include "runtime/model_io/safetensors.h"
#include "runtime/model_io/tensor.h"

#include <string>
#include <string_view>
#include <vector>

namespace train::model_io {

struct ExpectedTensor {
  std::string name;            // torchvision's state_dict key
  std::vector<int64_t> shape;  // torchvision's shape
  Dtype dtype = Dtype::F32;    // F32 or I64
};

struct InitialWeights {
  // The file's tensors that the model takes, converted to the expected dtype, in the expected order.
  std::vector<Tensor> tensors;
  // Expected tensors the file does not provide (to be initialised as for a fresh model), in order.
  std::vector<std::string> reinitialise;
  // One line per deliberate deviation (classifier re-initialised, counters missing), for the log.
  std::vector<std::string> notes;

  const Tensor* find(std::string_view name) const;
};

// Matches `file` (read from `source`) against `expected`. `model_name` ("resnet50") appears in messages.
// `classifier` is the prefix of the tensors that may change shape with the number of classes.
// Throws SafetensorsError naming the source, the tensor and what is wrong.
InitialWeights select_initial_weights(const SafetensorsFile& file, std::string_view source,
                                      const std::vector<ExpectedTensor>& expected, std::string_view model_name,
                                      std::string_view classifier = "fc.");

}  // namespace train::model_io
