// The trained model as the job leaves it in /opt/ml/model (SageMaker tars that directory to S3):
//
//   model.safetensors  fp32 weights with torchvision's names and shapes (conv weights OIHW), BN running
//                      statistics and num_batches_tracked (int64) included, so that
//                      torchvision.models.resnet50(num_classes=N).load_state_dict(...) takes it as it is
//   model.json         what a user needs to run it: arch, classes and their names, input shape and
//                      layout, normalisation
//
// Both are written atomically (temporary name, fsync, rename), model.safetensors first, so a model.json
// always describes a complete weights file.
#pragma once

#include "runtime/model_io/tensor.h"

#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace train::model_io {

constexpr std::string_view model_weights_file_name = "model.safetensors";
constexpr std::string_view model_description_file_name = "model.json";

struct ModelDescription {
  int num_layers = 50;
  int num_classes = 0;
  // Class names by label; empty when the data has no names (synthetic data, numeric labels), in which case
  // the labels' decimal numbers are written as names. Otherwise it must hold num_classes names.
  std::vector<std::string> classes;
  std::array<int, 3> input_shape{3, 224, 224};  // channels, height, width
  // Applied to pixels already scaled to [0, 1].
  std::array<double, 3> mean{0.485, 0.456, 0.406};
  std::array<double, 3> std{0.229, 0.224, 0.225};
  std::string version;  // train's version

  std::string arch() const { return "resnet" + std::to_string(num_layers); }
};

// model.json's text. Throws std::invalid_argument when `classes` is neither empty nor num_classes long.
std::string model_json_text(const ModelDescription& description);
// Parses model.json (as written by model_json_text). Throws std::runtime_error naming `source`.
ModelDescription parse_model_json(std::string_view text, std::string_view source);

// Writes model.safetensors (the tensors as given: the caller converts to fp32 OIHW) and model.json into
// `directory`, creating it if needed.
void write_model_files(const std::filesystem::path& directory, const std::vector<TensorView>& tensors,
                       const ModelDescription& description);

}  // namespace train::model_io
