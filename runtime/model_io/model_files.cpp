#include "runtime/model_io/model_files.h"

#include "common/atomic_file.h"
#include "common/environment_error.h"
#include "runtime/model_io/safetensors.h"
#include "runtime/model_io/tensor_checksums.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

namespace train::model_io {

std::string model_json_text(const ModelDescription& d) {
  if (!d.classes.empty() && static_cast<int>(d.classes.size()) != d.num_classes) {
    throw std::invalid_argument(
        fmt::format("model.json: {} class names for num_classes {}", d.classes.size(), d.num_classes));
  }
  std::vector<std::string> classes = d.classes;
  if (classes.empty()) {
    for (int label = 0; label < d.num_classes; ++label) classes.push_back(std::to_string(label));
  }
  nlohmann::ordered_json json = {
      {"arch", d.arch()},
      {"num_layers", d.num_layers},
      {"num_classes", d.num_classes},
      {"classes", classes},
      {"input_shape", d.input_shape},
      // The network takes NCHW input in PyTorch; the weights file holds torchvision's OIHW convolutions.
      {"layout", "NCHW"},
      {"weights", model_weights_file_name},
      {"normalization", {{"scale", 1.0 / 255.0}, {"mean", d.mean}, {"std", d.std}}},
      {"framework", "train"},
      {"version", d.version},
  };
  return json.dump(2) + "\n";
}

ModelDescription parse_model_json(std::string_view text, std::string_view source) {
  ModelDescription d;
  try {
    auto json = nlohmann::json::parse(text);
    d.num_layers = json.at("num_layers").get<int>();
    d.num_classes = json.at("num_classes").get<int>();
    d.classes = json.at("classes").get<std::vector<std::string>>();
    d.input_shape = json.at("input_shape").get<std::array<int, 3>>();
    d.mean = json.at("normalization").at("mean").get<std::array<double, 3>>();
    d.std = json.at("normalization").at("std").get<std::array<double, 3>>();
    d.version = json.value("version", "");
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(fmt::format("{}: not a valid model.json: {}", source, error.what()));
  }
  return d;
}

void write_model_files(const std::filesystem::path& directory, const std::vector<TensorView>& tensors,
                       const ModelDescription& description) {
  std::string json = model_json_text(description);  // checks before anything is written
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw_file_error("create the model directory", directory.string(), error.value());
  // What a writer killed mid-file left (SageMaker would ship it in model.tar.gz), as write_checkpoint sweeps
  // checkpoints/: only these two files' own temporary names, never anything else of the folder's.
  for (std::string_view name : {model_weights_file_name, model_description_file_name}) {
    remove_stale_temporaries((directory / name).string());
  }
  // "format": "pt" is what Hugging Face's loaders look for to treat the file as PyTorch's; the checksums
  // let a `model` channel that is given this file back find damage.
  Metadata metadata = with_tensor_checksums(tensors, {{"format", "pt"}, {"arch", description.arch()},
                                                      {"framework", "train"}});
  write_safetensors((directory / model_weights_file_name).string(), tensors, metadata);
  write_file_atomically((directory / model_description_file_name).string(), json);
}

}  // namespace train::model_io
