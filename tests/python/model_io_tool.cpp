// The C++ side of test_safetensors_interop.py: reads and writes files through runtime/model_io exactly as
// the training program does, so that PyTorch can check them. Not installed; a test tool.
//
//   model_io_tool dump IN.safetensors
//       prints {"metadata": {...}, "tensors": [{"name", "dtype", "shape", "crc32", "sum", "abs_sum"}, ...]}
//       in file order; crc32 is zlib's over the raw bytes, the sums are over the values as float or int64
//   model_io_tool write-random OUT.safetensors [SEED] < [{"name": ..., "shape": [...], "dtype": "F32"}, ...]
//       writes those tensors with pseudo-random values (running_var positive), then dumps the file
//   model_io_tool write-model DIR DEPTH CLASSES
//       writes DIR/model.safetensors and DIR/model.json for a random ResNet-DEPTH (our spec), then dumps
//   model_io_tool spec DEPTH CLASSES
//       prints our ResNet spec's tensors as [{"name", "shape", "dtype"}, ...] in state_dict order
//   model_io_tool to-oihw IN OUT
//       rewrites every 4-D F32 tensor from OHWI [o, h, w, i] to OIHW [o, i, h, w]
//   model_io_tool load-initial IN DEPTH CLASSES
//       matches IN against ResNet-DEPTH with CLASSES classes as the `model` channel would; prints
//       {"taken": [...], "reinitialise": [...], "notes": [...]}
//
// Errors go to stderr as "model_io_tool: MESSAGE", exit status 1.
#include "runtime/model/resnet_spec.h"
#include "runtime/model_io/initial_weights.h"
#include "runtime/model_io/layout.h"
#include "runtime/model_io/model_files.h"
#include "runtime/model_io/safetensors.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstring>
#include <iostream>
#include <string>

using namespace train::model_io;
using nlohmann::json;

namespace {

uint32_t crc32(const std::byte* data, size_t size) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> entries{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      entries[n] = c;
    }
    return entries;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ static_cast<uint8_t>(data[i])) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

json dump(const std::string& path) {
  SafetensorsFile file = read_safetensors(path);
  json tensors = json::array();
  for (const auto& tensor : file.tensors) {
    double sum = 0, abs_sum = 0;
    if (is_floating(tensor.dtype)) {
      for (float value : tensor.to_float()) sum += value, abs_sum += std::abs(value);
    } else {
      for (int64_t value : tensor.to_int64()) sum += static_cast<double>(value), abs_sum += std::abs(static_cast<double>(value));
    }
    tensors.push_back({{"name", tensor.name},
                       {"dtype", dtype_name(tensor.dtype)},
                       {"shape", tensor.shape},
                       {"crc32", crc32(tensor.data.data(), tensor.data.size())},
                       {"sum", sum},
                       {"abs_sum", abs_sum}});
  }
  return {{"metadata", file.metadata}, {"tensors", tensors}};
}

// splitmix64: a small, well-mixed generator, so the values do not depend on the standard library.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) / 16777216.0f * 2.0f - 1.0f; }  // [-1, 1)
};

struct RandomTensors {
  std::vector<Tensor> tensors;
  std::vector<TensorView> views() const {
    std::vector<TensorView> result;
    for (const auto& tensor : tensors) result.push_back(tensor.view());
    return result;
  }
};

RandomTensors random_tensors(const json& list, uint64_t seed) {
  Random random{seed};
  RandomTensors result;
  for (const auto& item : list) {
    std::string name = item.at("name").get<std::string>();
    auto shape = item.at("shape").get<std::vector<int64_t>>();
    auto dtype = parse_dtype(item.value("dtype", "F32"));
    int64_t count = element_count(shape).value();
    if (dtype == Dtype::I64) {
      std::vector<int64_t> values(count);
      for (auto& value : values) value = static_cast<int64_t>(random.next() % 100000);
      result.tensors.push_back(Tensor::from_int64s(name, shape, values));
    } else if (dtype == Dtype::F32) {
      bool positive = name.size() >= 12 && name.compare(name.size() - 12, 12, ".running_var") == 0;
      std::vector<float> values(count);
      for (auto& value : values) value = positive ? 0.5f + std::abs(random.uniform()) : random.uniform();
      result.tensors.push_back(Tensor::from_floats(name, shape, values));
    } else {
      throw std::invalid_argument("write-random writes F32 and I64 tensors, not " + item.value("dtype", ""));
    }
  }
  return result;
}

json spec_list(int depth, int classes) {
  json list = json::array();
  for (const auto& tensor : train::model::build_resnet_spec(depth, classes).tensors) {
    bool counter = tensor.role == train::model::TensorRole::bn_batches_tracked;
    list.push_back({{"name", tensor.name}, {"shape", tensor.shape}, {"dtype", counter ? "I64" : "F32"}});
  }
  return list;
}

int run(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: model_io_tool dump IN | write-random OUT [SEED] | write-model DIR DEPTH CLASSES | spec DEPTH CLASSES | "
      "to-oihw IN OUT | load-initial IN DEPTH CLASSES";
  if (args.empty()) throw std::invalid_argument(usage);
  const std::string& command = args[0];
  if (command == "dump" && args.size() == 2) {
    std::cout << dump(args[1]).dump() << "\n";
  } else if (command == "write-random" && (args.size() == 2 || args.size() == 3)) {
    json list = json::parse(std::cin);
    auto tensors = random_tensors(list, args.size() == 3 ? std::stoull(args[2]) : 1);
    write_safetensors(args[1], tensors.views(), {{"format", "pt"}, {"writer", "model_io_tool"}});
    std::cout << dump(args[1]).dump() << "\n";
  } else if (command == "write-model" && args.size() == 4) {
    int depth = std::stoi(args[2]), classes = std::stoi(args[3]);
    auto tensors = random_tensors(spec_list(depth, classes), 7);
    ModelDescription description;
    description.num_layers = depth;
    description.num_classes = classes;
    for (int label = 0; label < classes; ++label) description.classes.push_back("class " + std::to_string(label));
    description.version = "test";
    write_model_files(args[1], tensors.views(), description);
    std::cout << dump(args[1] + "/model.safetensors").dump() << "\n";
  } else if (command == "spec" && args.size() == 3) {
    std::cout << spec_list(std::stoi(args[1]), std::stoi(args[2])).dump() << "\n";
  } else if (command == "to-oihw" && args.size() == 3) {
    SafetensorsFile file = read_safetensors(args[1]);
    for (auto& tensor : file.tensors) {
      if (tensor.dtype != Dtype::F32 || tensor.shape.size() != 4) continue;
      ConvWeightShape shape{tensor.shape[0], tensor.shape[3], tensor.shape[1], tensor.shape[2]};
      tensor = Tensor::from_floats(tensor.name, shape.oihw(), ohwi_to_oihw(tensor.to_float(), shape));
    }
    std::vector<TensorView> views;
    for (const auto& tensor : file.tensors) views.push_back(tensor.view());
    write_safetensors(args[2], views, file.metadata);
  } else if (command == "load-initial" && args.size() == 4) {
    int depth = std::stoi(args[2]), classes = std::stoi(args[3]);
    std::vector<ExpectedTensor> expected;
    for (const auto& item : spec_list(depth, classes)) {
      expected.push_back({item.at("name").get<std::string>(), item.at("shape").get<std::vector<int64_t>>(),
                          item.at("dtype") == "I64" ? Dtype::I64 : Dtype::F32});
    }
    auto weights = select_initial_weights(read_safetensors(args[1]), args[1], expected,
                                          "resnet" + std::to_string(depth));
    json taken = json::array();
    for (const auto& tensor : weights.tensors) taken.push_back(tensor.name);
    std::cout << json{{"taken", taken}, {"reinitialise", weights.reinitialise}, {"notes", weights.notes}}.dump()
              << "\n";
  } else {
    throw std::invalid_argument(usage);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& error) {
    std::cerr << "model_io_tool: " << error.what() << "\n";
    return 1;
  }
}
