// initialize_resnet's draw: torchvision's distributions per tensor, the same values for the same seed, and a
// tensor's values independent of the tensors around it (a classifier of another size leaves every convolution
// as it was).
#include "runtime/model/resnet_plan.h"
#include "runtime/model/resnet_spec.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

using namespace train::model;

namespace {

struct Drawn {
  std::map<std::string, std::vector<float>> tensors;  // every parameter, by torchvision's name
};

Drawn draw(int depth, int classes, uint64_t seed) {
  const ResNetPlan plan = plan_resnet(build_resnet_spec(depth, classes), 2, 32, 32);
  std::vector<float> parameters(plan.parameter_elements), buffers(plan.float_buffer_elements);
  std::vector<int64_t> tracked(plan.float_buffer_elements);
  initialize_resnet(plan, seed, parameters.data(), buffers.data(), tracked.data());
  Drawn drawn;
  for (const auto& slot : plan.parameters) {
    const float* values = parameters.data() + slot.offset;
    drawn.tensors[plan.spec.tensors[static_cast<size_t>(slot.spec_index)].name] =
        std::vector<float>(values, values + slot.count);
  }
  return drawn;
}

struct Moments {
  double mean = 0, variance = 0, largest = 0;
};

Moments moments_of(const std::vector<float>& values) {
  Moments m;
  for (float v : values) m.mean += v;
  m.mean /= static_cast<double>(values.size());
  for (float v : values) {
    m.variance += (v - m.mean) * (v - m.mean);
    m.largest = std::max(m.largest, std::abs(static_cast<double>(v)));
  }
  m.variance /= static_cast<double>(values.size());
  return m;
}

}  // namespace

TEST_CASE("initial weights: torchvision's distributions, tensor by tensor", "[model]") {
  const ResNetSpec spec = build_resnet_spec(18, 10);
  const Drawn drawn = draw(18, 10, 42);
  int convolutions = 0;
  for (const auto& tensor : spec.tensors) {
    if (!tensor.is_parameter()) continue;
    const std::vector<float>& values = drawn.tensors.at(tensor.name);
    const double n = static_cast<double>(values.size());
    const Moments m = moments_of(values);
    INFO(tensor.name << ": " << n << " values, mean " << m.mean << ", variance " << m.variance);
    switch (tensor.role) {
      case TensorRole::conv_weight: {
        // Kaiming normal, fan_out: variance 2 / (out * kh * kw). The sample mean is within 5 standard errors of
        // 0 and the sample variance within 5 of its own (2 sigma^4 / n for a normal) of sigma^2.
        const double sigma2 = 2.0 / static_cast<double>(tensor.shape[0] * tensor.shape[2] * tensor.shape[3]);
        CHECK(std::abs(m.mean) < 5 * std::sqrt(sigma2 / n));
        CHECK(std::abs(m.variance - sigma2) < 5 * sigma2 * std::sqrt(2.0 / n));
        CHECK(m.largest < 7 * std::sqrt(sigma2));  // a normal's tail: 7 sigma is not reached in 2.4 M draws
        ++convolutions;
        break;
      }
      case TensorRole::bn_weight: CHECK(m.mean == 1.0); CHECK(m.variance == 0.0); break;
      case TensorRole::bn_bias: CHECK(m.mean == 0.0); CHECK(m.variance == 0.0); break;
      case TensorRole::fc_weight:
      case TensorRole::fc_bias: {
        // U(-b, b), b = 1 / sqrt(512): every value inside, the variance b^2 / 3 within 5 standard errors.
        const double bound = 1.0 / std::sqrt(512.0), variance = bound * bound / 3;
        CHECK(m.largest <= bound);
        if (tensor.role == TensorRole::fc_weight) {
          CHECK(std::abs(m.mean) < 5 * std::sqrt(variance / n));
          CHECK(std::abs(m.variance - variance) < 5 * std::sqrt((bound * bound * bound * bound / 5 - variance *
                                                                 variance) / n));
        }
        break;
      }
      default: break;
    }
  }
  CHECK(convolutions == 20);
}

TEST_CASE("initial weights: the seed decides every value, and nothing else does", "[model]") {
  const Drawn once = draw(18, 10, 7), again = draw(18, 10, 7), other_seed = draw(18, 10, 8);
  CHECK(once.tensors == again.tensors);
  CHECK(once.tensors.at("layer4.1.conv2.weight") != other_seed.tensors.at("layer4.1.conv2.weight"));
  CHECK(once.tensors.at("conv1.weight") != other_seed.tensors.at("conv1.weight"));
  // Another classifier: fc is drawn again at its new size, every convolution keeps its values.
  const Drawn hundred = draw(18, 100, 7);
  for (const auto& [name, values] : once.tensors) {
    INFO(name);
    if (name.rfind("fc.", 0) == 0) {
      CHECK(hundred.tensors.at(name).size() == values.size() * 10);
    } else {
      CHECK(hundred.tensors.at(name) == values);
    }
  }
  // Within a tensor, the chunks of a million values are streams of their own: no two chunks repeat.
  const std::vector<float>& large = once.tensors.at("layer4.1.conv2.weight");  // 2.36 M values: three chunks
  REQUIRE(large.size() > 2 * (size_t{1} << 20));
  const size_t chunk = size_t{1} << 20;
  CHECK(std::vector<float>(large.begin(), large.begin() + 1000) !=
        std::vector<float>(large.begin() + chunk, large.begin() + chunk + 1000));
}
