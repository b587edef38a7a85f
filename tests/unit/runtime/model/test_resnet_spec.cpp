#include "runtime/model/resnet_spec.h"

#include <catch2/catch.hpp>

#include <set>

using namespace train;
using namespace train::model;

TEST_CASE("ResNet-50 has torchvision's 161 parameter tensors and 25,557,032 parameters", "[model]") {
  auto spec = build_resnet_spec(50, 1000);
  CHECK(spec.parameter_tensor_count() == 161);
  CHECK(spec.parameter_count() == 25557032);
  // 53 batch norms, each with three buffers.
  CHECK(spec.tensors.size() == 161 + 53 * 3);
}

TEST_CASE("ResNet family parameter counts match torchvision", "[model]") {
  // torchvision.models.resnetN(num_classes=1000): sum(p.numel() for p in model.parameters())
  CHECK(build_resnet_spec(18, 1000).parameter_count() == 11689512);
  CHECK(build_resnet_spec(34, 1000).parameter_count() == 21797672);
  CHECK(build_resnet_spec(101, 1000).parameter_count() == 44549160);
  CHECK(build_resnet_spec(152, 1000).parameter_count() == 60192808);
}

TEST_CASE("ResNet-50 names and shapes follow torchvision", "[model]") {
  auto spec = build_resnet_spec(50, 10);
  std::set<std::string> names;
  for (const auto& tensor : spec.tensors) REQUIRE(names.insert(tensor.name).second);
  auto find = [&](const std::string& name) -> const TensorSpec& {
    for (const auto& tensor : spec.tensors) {
      if (tensor.name == name) return tensor;
    }
    FAIL("missing " << name);
    throw;
  };
  CHECK(find("conv1.weight").shape == std::vector<int64_t>{64, 3, 7, 7});
  CHECK(find("layer1.0.downsample.0.weight").shape == std::vector<int64_t>{256, 64, 1, 1});
  CHECK(find("layer2.0.conv2.weight").shape == std::vector<int64_t>{128, 128, 3, 3});
  CHECK(find("layer4.2.bn3.running_var").shape == std::vector<int64_t>{2048});
  CHECK(find("layer3.5.bn1.num_batches_tracked").shape.empty());
  CHECK(find("fc.weight").shape == std::vector<int64_t>{10, 2048});
  CHECK(find("fc.bias").shape == std::vector<int64_t>{10});
  CHECK(spec.tensors.front().name == "conv1.weight");
  CHECK(spec.tensors.back().name == "fc.bias");
}

TEST_CASE("ResNet v1.5 puts the stride on the 3x3 convolution", "[model]") {
  auto spec = build_resnet_spec(50, 1000);
  for (const auto& layer : spec.layers) {
    if (layer.name == "layer2.0.conv1") CHECK(layer.stride == 1);
    if (layer.name == "layer2.0.conv2") CHECK(layer.stride == 2);
    if (layer.name == "layer2.0.downsample.0") CHECK(layer.stride == 2);
  }
}

TEST_CASE("Only conv and fc weights take weight decay", "[model]") {
  auto spec = build_resnet_spec(18, 10);
  for (const auto& tensor : spec.tensors) {
    bool expected = tensor.name.find("conv") != std::string::npos || tensor.name == "fc.weight" ||
                    tensor.name.find("downsample.0") != std::string::npos;
    CHECK(tensor.decays() == expected);
  }
}

TEST_CASE("Unsupported depths are refused", "[model]") {
  CHECK_THROWS_AS(build_resnet_spec(20, 10), std::invalid_argument);
}
