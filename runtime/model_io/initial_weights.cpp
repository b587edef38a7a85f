#include "runtime/model_io/initial_weights.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace train::model_io {

namespace {

constexpr std::string_view ddp_prefix = "module.";
constexpr std::string_view counter_suffix = ".num_batches_tracked";

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }
bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

[[noreturn]] void fail_tensor(std::string_view source, std::string_view name, std::string_view what) {
  throw SafetensorsError(fmt::format("{}: tensor \"{}\": {}", source, name, what));
}

// Same shape but for the first dimension (the number of classes of a classifier tensor).
bool differs_only_in_classes(const std::vector<int64_t>& found, const std::vector<int64_t>& wanted) {
  if (found.size() != wanted.size() || found.empty() || found[0] == wanted[0]) return false;
  for (size_t i = 1; i < found.size(); ++i) {
    if (found[i] != wanted[i]) return false;
  }
  return true;
}

Tensor convert(const Tensor& found, const ExpectedTensor& wanted, std::string_view source) {
  if (wanted.dtype == Dtype::I64) {
    if (is_floating(found.dtype)) {
      fail_tensor(source, found.name,
                  fmt::format("dtype {}, expected an integer type (I64 as PyTorch saves it)", dtype_name(found.dtype)));
    }
    return Tensor::from_int64s(wanted.name, wanted.shape, found.to_int64());
  }
  if (!is_floating(found.dtype)) {
    fail_tensor(source, found.name,
                fmt::format("dtype {}, expected a floating-point type (F32, F64, F16 or BF16)", dtype_name(found.dtype)));
  }
  return Tensor::from_floats(wanted.name, wanted.shape, found.to_float());
}

}  // namespace

const Tensor* InitialWeights::find(std::string_view name) const {
  for (const auto& tensor : tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

InitialWeights select_initial_weights(const SafetensorsFile& file, std::string_view source,
                                      const std::vector<ExpectedTensor>& expected, std::string_view model_name,
                                      std::string_view classifier) {
  // A model saved from inside DistributedDataParallel has every name under "module.".
  bool wrapped = !file.tensors.empty();
  for (const auto& tensor : file.tensors) wrapped = wrapped && starts_with(tensor.name, ddp_prefix);
  std::map<std::string, const Tensor*, std::less<>> found;
  for (const auto& tensor : file.tensors) {
    found[wrapped ? tensor.name.substr(ddp_prefix.size()) : tensor.name] = &tensor;
  }

  InitialWeights result;
  // The classifier is re-initialised as a whole when its number of classes differs from the model's.
  bool new_classes = false;
  int64_t file_classes = 0, model_classes = 0;
  for (const auto& wanted : expected) {
    auto it = found.find(wanted.name);
    if (starts_with(wanted.name, classifier) && it != found.end() &&
        differs_only_in_classes(it->second->shape, wanted.shape)) {
      new_classes = true;
      file_classes = it->second->shape[0];
      model_classes = wanted.shape[0];
    }
  }

  std::set<std::string_view> expected_names;
  std::vector<std::string> reinitialised_classifier;
  for (const auto& wanted : expected) {
    expected_names.insert(wanted.name);
    auto it = found.find(wanted.name);
    if (new_classes && starts_with(wanted.name, classifier)) {
      if (it != found.end() && !differs_only_in_classes(it->second->shape, wanted.shape)) {
        fail_tensor(source, it->second->name,
                    fmt::format("shape {} in the file, but {} has {}", shape_text(it->second->shape), model_name,
                                shape_text(wanted.shape)));
      }
      result.reinitialise.push_back(wanted.name);
      reinitialised_classifier.push_back(wanted.name);
      continue;
    }
    if (it == found.end()) {
      if (ends_with(wanted.name, counter_suffix)) {
        result.reinitialise.push_back(wanted.name);
        continue;
      }
      throw SafetensorsError(
          fmt::format("{}: tensor \"{}\" is missing: {} needs it (is this a {} model file?)", source,
                      wanted.name, model_name, model_name));
    }
    const Tensor& tensor = *it->second;
    if (tensor.shape != wanted.shape) {
      fail_tensor(source, tensor.name,
                  fmt::format("shape {} in the file, but {} has {} (a different architecture or depth?)",
                              shape_text(tensor.shape), model_name, shape_text(wanted.shape)));
    }
    result.tensors.push_back(convert(tensor, wanted, source));
  }

  for (const auto& tensor : file.tensors) {  // in file order, so the first stranger is named
    std::string_view name = tensor.name;
    if (wrapped) name.remove_prefix(ddp_prefix.size());
    if (!expected_names.count(name)) {
      fail_tensor(source, tensor.name,
                  fmt::format("{} has no tensor of this name (a different architecture?)", model_name));
    }
  }

  if (new_classes) {
    result.notes.push_back(fmt::format("{}: the file's classifier has {} classes, this model {}: {} re-initialised",
                                       source, file_classes, model_classes,
                                       fmt::join(reinitialised_classifier, " and ")));
  }
  int missing_counters = 0;
  for (const auto& name : result.reinitialise) missing_counters += ends_with(name, counter_suffix);
  if (missing_counters > 0) {
    result.notes.push_back(fmt::format("{}: {} batch-norm num_batches_tracked counters are missing (a file saved "
                                       "before PyTorch 0.4.1); they start at 0",
                                       source, missing_counters));
  }
  return result;
}

}  // namespace train::model_io
