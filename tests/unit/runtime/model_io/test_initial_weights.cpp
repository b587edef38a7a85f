#include "runtime/model/resnet_spec.h"
#include "runtime/model_io/initial_weights.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

using namespace train::model_io;

namespace {

// A tiny "model": one conv, one BN, a classifier.
std::vector<ExpectedTensor> tiny_model(int64_t classes) {
  return {{"conv1.weight", {4, 3, 1, 1}, Dtype::F32},     {"bn1.weight", {4}, Dtype::F32},
          {"bn1.bias", {4}, Dtype::F32},                  {"bn1.running_mean", {4}, Dtype::F32},
          {"bn1.running_var", {4}, Dtype::F32},           {"bn1.num_batches_tracked", {}, Dtype::I64},
          {"fc.weight", {classes, 4}, Dtype::F32},        {"fc.bias", {classes}, Dtype::F32}};
}

// A file holding `expected` with recognisable values: element k of tensor t is t * 100 + k.
SafetensorsFile file_for(const std::vector<ExpectedTensor>& expected, const std::string& prefix = "") {
  SafetensorsFile file;
  for (size_t t = 0; t < expected.size(); ++t) {
    int64_t count = *element_count(expected[t].shape);
    if (expected[t].dtype == Dtype::I64) {
      file.tensors.push_back(Tensor::from_int64s(prefix + expected[t].name, expected[t].shape,
                                                 std::vector<int64_t>(count, 1000 + static_cast<int64_t>(t))));
    } else {
      std::vector<float> values(count);
      for (int64_t k = 0; k < count; ++k) values[k] = static_cast<float>(t * 100 + k);
      file.tensors.push_back(Tensor::from_floats(prefix + expected[t].name, expected[t].shape, values));
    }
  }
  return file;
}

Tensor& tensor_named(SafetensorsFile& file, const std::string& name) {
  for (auto& tensor : file.tensors) {
    if (tensor.name == name) return tensor;
  }
  throw std::runtime_error("no " + name);
}

std::string error_of(const SafetensorsFile& file, const std::vector<ExpectedTensor>& expected) {
  try {
    select_initial_weights(file, "model/model.safetensors", expected, "resnet50");
  } catch (const SafetensorsError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("initial weights: a file of the same model is taken whole", "[model_io]") {
  auto expected = tiny_model(10);
  auto weights = select_initial_weights(file_for(expected), "m", expected, "resnet50");
  CHECK(weights.reinitialise.empty());
  CHECK(weights.notes.empty());
  REQUIRE(weights.tensors.size() == expected.size());
  for (size_t t = 0; t < expected.size(); ++t) {
    CHECK(weights.tensors[t].name == expected[t].name);
    CHECK(weights.tensors[t].shape == expected[t].shape);
    CHECK(weights.tensors[t].dtype == expected[t].dtype);
  }
  CHECK(weights.find("fc.bias")->to_float()[3] == 703.0f);
  CHECK(weights.find("bn1.num_batches_tracked")->to_int64() == std::vector<int64_t>{1005});
  CHECK(weights.find("fc.nothing") == nullptr);
}

TEST_CASE("initial weights: another number of classes re-initialises only fc", "[model_io]") {
  auto weights = select_initial_weights(file_for(tiny_model(1000)), "m", tiny_model(10), "resnet50");
  CHECK(weights.reinitialise == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(weights.tensors.size() == 6);
  CHECK(weights.find("fc.weight") == nullptr);
  CHECK(weights.find("conv1.weight")->to_float()[2] == 2.0f);
  CHECK(weights.notes ==
        std::vector<std::string>{"m: the file's classifier has 1000 classes, this model 10: fc.weight and fc.bias "
                                 "re-initialised"});
}

TEST_CASE("initial weights: DDP names, old files without counters, other float types", "[model_io]") {
  auto expected = tiny_model(10);
  SECTION("module. prefix") {
    auto weights = select_initial_weights(file_for(expected, "module."), "m", expected, "resnet50");
    CHECK(weights.tensors.size() == expected.size());
    CHECK(weights.tensors[0].name == "conv1.weight");
  }
  SECTION("no num_batches_tracked (saved before PyTorch 0.4.1)") {
    auto file = file_for(expected);
    file.tensors.erase(file.tensors.begin() + 5);
    auto weights = select_initial_weights(file, "m", expected, "resnet50");
    CHECK(weights.reinitialise == std::vector<std::string>{"bn1.num_batches_tracked"});
    CHECK(weights.notes == std::vector<std::string>{"m: 1 batch-norm num_batches_tracked counters are missing (a file "
                                                    "saved before PyTorch 0.4.1); they start at 0"});
  }
  SECTION("F16, BF16 and F64 become F32; I32 counters become I64") {
    auto file = file_for(expected);
    uint16_t half_two = 0x4000, bf16_three = 0x4040;
    double sixty_four = 64.0;
    int32_t seven = 7;
    auto replace = [&](const std::string& name, Dtype dtype, const void* value, size_t size) {
      Tensor& tensor = tensor_named(file, name);
      size_t count = static_cast<size_t>(tensor.elements());
      tensor.dtype = dtype;
      tensor.data.resize(count * size);
      for (size_t k = 0; k < count; ++k) std::memcpy(tensor.data.data() + k * size, value, size);
    };
    replace("bn1.weight", Dtype::F16, &half_two, 2);
    replace("bn1.bias", Dtype::BF16, &bf16_three, 2);
    replace("bn1.running_var", Dtype::F64, &sixty_four, 8);
    Tensor& counter = tensor_named(file, "bn1.num_batches_tracked");
    counter.dtype = Dtype::I32;
    counter.data.resize(4);
    std::memcpy(counter.data.data(), &seven, 4);
    auto weights = select_initial_weights(file, "m", expected, "resnet50");
    CHECK(weights.find("bn1.weight")->to_float() == std::vector<float>(4, 2.0f));
    CHECK(weights.find("bn1.bias")->to_float() == std::vector<float>(4, 3.0f));
    CHECK(weights.find("bn1.running_var")->to_float() == std::vector<float>(4, 64.0f));
    CHECK(weights.find("bn1.running_var")->dtype == Dtype::F32);
    CHECK(weights.find("bn1.num_batches_tracked")->to_int64() == std::vector<int64_t>{7});
    CHECK(weights.find("bn1.num_batches_tracked")->dtype == Dtype::I64);
  }
}

TEST_CASE("initial weights: a file of another model is refused, naming the tensor", "[model_io]") {
  auto expected = tiny_model(10);
  auto file = file_for(expected);
  SECTION("missing tensor") {
    file.tensors.erase(file.tensors.begin() + 1);
    CHECK(error_of(file, expected) ==
          "model/model.safetensors: tensor \"bn1.weight\" is missing: resnet50 needs it (is this a resnet50 model "
          "file?)");
  }
  SECTION("other shape") {
    tensor_named(file, "conv1.weight").shape = {4, 3, 3, 3};
    CHECK(error_of(file, expected) ==
          "model/model.safetensors: tensor \"conv1.weight\": shape [4, 3, 3, 3] in the file, but resnet50 has [4, 3, "
          "1, 1] (a different architecture or depth?)");
  }
  SECTION("classifier with other features") {
    tensor_named(file, "fc.weight").shape = {10, 2};
    CHECK(error_of(file, expected) ==
          "model/model.safetensors: tensor \"fc.weight\": shape [10, 2] in the file, but resnet50 has [10, 4] (a "
          "different architecture or depth?)");
  }
  SECTION("classifier with other classes and other features") {
    auto other = file_for(tiny_model(5));
    tensor_named(other, "fc.weight").shape = {5, 2};
    CHECK(error_of(other, expected) ==
          "model/model.safetensors: tensor \"fc.weight\": shape [5, 2] in the file, but resnet50 has [10, 4]");
  }
  SECTION("extra tensor") {
    file.tensors.push_back(Tensor::from_floats("layer5.0.conv1.weight", {1}, {1.0f}));
    CHECK(error_of(file, expected) ==
          "model/model.safetensors: tensor \"layer5.0.conv1.weight\": resnet50 has no tensor of this name (a different "
          "architecture?)");
  }
  SECTION("integer weights") {
    Tensor& weight = tensor_named(file, "bn1.weight");
    weight = Tensor::from_int64s("bn1.weight", {4}, {1, 2, 3, 4});
    CHECK(error_of(file, expected) ==
          "model/model.safetensors: tensor \"bn1.weight\": dtype I64, expected a floating-point type (F32, F64, F16 "
          "or BF16)");
  }
  SECTION("float counter") {
    tensor_named(file, "bn1.num_batches_tracked") = Tensor::from_floats("bn1.num_batches_tracked", {}, {1.0f});
    CHECK(error_of(file, expected) ==
          "model/model.safetensors: tensor \"bn1.num_batches_tracked\": dtype F32, expected an integer type (I64 as "
          "PyTorch saves it)");
  }
}

TEST_CASE("initial weights: ResNet-50 with 1000 classes starts a 10-class ResNet-50", "[model_io]") {
  auto to_expected = [](const train::model::ResNetSpec& spec) {
    std::vector<ExpectedTensor> expected;
    for (const auto& tensor : spec.tensors) {
      expected.push_back({tensor.name, tensor.shape,
                          tensor.role == train::model::TensorRole::bn_batches_tracked ? Dtype::I64 : Dtype::F32});
    }
    return expected;
  };
  auto imagenet = to_expected(train::model::build_resnet_spec(50, 1000));
  auto ten = to_expected(train::model::build_resnet_spec(50, 10));
  auto weights = select_initial_weights(file_for(imagenet), "m", ten, "resnet50");
  CHECK(weights.reinitialise == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(weights.tensors.size() == ten.size() - 2);
  // ResNet-18's file is refused for ResNet-50 (its first bottleneck's 1x1 conv is a 3x3 there).
  auto eighteen = to_expected(train::model::build_resnet_spec(18, 10));
  CHECK(error_of(file_for(eighteen), ten) ==
        "model/model.safetensors: tensor \"layer1.0.conv1.weight\": shape [64, 64, 3, 3] in the file, but resnet50 "
        "has [64, 64, 1, 1] (a different architecture or depth?)");
}
