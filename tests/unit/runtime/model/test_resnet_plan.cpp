// The plan's backward routes and its gradient buffers: sharing buffers by lifetime must not change a single
// gradient, and must need far less memory.
#include "runtime/comm/gradient_buckets.h"
#include "runtime/model/cpu_resnet.h"
#include "runtime/model/resnet_plan.h"
#include "kernels/ops.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

using namespace train;
using namespace train::model;

namespace {

// One training step in fp64 with the given gradient memory; returns every parameter gradient and the loss.
std::vector<double> step_gradients(int depth, int size, GradientMemory memory, double* loss) {
  ResNetPlan plan = plan_resnet(build_resnet_spec(depth, 10), 3, size, size, memory);
  comm::GradientBuffer<double> gradients(plan.parameter_counts(), size_t{1} << 20);
  CpuResNet<double> model(std::move(plan), gradients.views());
  model.initialize(7);
  std::mt19937 generator(11);
  std::normal_distribution<double> normal;
  std::vector<double> images(static_cast<size_t>(3) * size * size * 3);
  for (auto& value : images) value = normal(generator);
  const std::vector<int32_t> labels = {1, 4, 9};
  *loss = model.forward_and_loss(images.data(), labels.data(), 3, 0.1, 1.0).loss;
  model.backward({}, {});
  return gradients.values();
}

}  // namespace

TEST_CASE("Gradient buffers shared by lifetime give bit-identical gradients", "[model]") {
  for (int depth : {18, 50}) {
    double loss_reference = 0, loss_shared = 0;
    const auto reference = step_gradients(depth, 32, GradientMemory::per_activation, &loss_reference);
    const auto shared = step_gradients(depth, 32, GradientMemory::shared_by_lifetime, &loss_shared);
    CAPTURE(depth);
    CHECK(loss_shared == loss_reference);
    CHECK(shared == reference);
  }
}

TEST_CASE("Gradient buffers shared by lifetime need a fraction of the memory", "[model]") {
  const ResNetPlan reference = plan_resnet(build_resnet_spec(50, 1000), 8, 224, 224, GradientMemory::per_activation);
  const ResNetPlan shared = plan_resnet(build_resnet_spec(50, 1000), 8, 224, 224, GradientMemory::shared_by_lifetime);
  int64_t activations = 0;
  for (size_t a = 1; a < reference.max_shapes.size(); ++a) {
    if (reference.storage_of[a] == static_cast<int>(a)) activations += reference.max_shapes[a].size();
  }
  INFO("activation gradients: " << reference.gradient_elements() << " elements one buffer each, "
       << shared.gradient_elements() << " shared in " << shared.gradient_buffers.size() << " buffers; activations "
       << activations);
  CHECK(shared.gradient_elements() * 5 < reference.gradient_elements());
  // The largest activation's gradient (after the stem) and the one it is computed from must coexist.
  CHECK(shared.gradient_elements() >= 2 * shared.largest_activation);
}

TEST_CASE("Every backward route reads and writes different buffers", "[model]") {
  for (auto memory : {GradientMemory::per_activation, GradientMemory::shared_by_lifetime}) {
    const ResNetPlan plan = plan_resnet(build_resnet_spec(50, 10), 2, 64, 64, memory);
    REQUIRE(plan.backward.size() == plan.spec.layers.size());
    for (const auto& route : plan.backward) {
      if (route.skip) continue;
      CHECK(route.dy >= 0);
      if (route.dx.buffer >= 0) CHECK(route.dx.buffer != route.dy);
      if (route.dx_b.buffer >= 0) CHECK(route.dx_b.buffer != route.dy);
    }
  }
}

namespace {

// The layout before tensors were aligned: parameters and gradients packed back to back (the same tensors
// in the same buckets), to show that alignment moves values without changing one of them.
void pack_tensors(ResNetPlan& plan, comm::BucketPlan& buckets) {
  size_t offset = 0;
  for (auto& slot : plan.parameters) {
    slot.offset = offset;
    offset += static_cast<size_t>(slot.count);
  }
  plan.parameter_elements = offset;
  offset = 0;
  for (auto& bucket : buckets.buckets) {
    bucket.begin = offset;
    for (int tensor : bucket.tensors) {
      buckets.offset_of_tensor[static_cast<size_t>(tensor)] = offset;
      offset += static_cast<size_t>(plan.parameters[static_cast<size_t>(tensor)].count);
    }
    bucket.end = offset;
  }
  buckets.total_elements = offset;
}

// Three SGD steps of ResNet-18 (37 classes: every tensor after fc.bias unaligned when packed) in fp32;
// returns the model state in torchvision's names.
ExportedTensors train_three_steps(bool packed) {
  ResNetPlan plan = plan_resnet(build_resnet_spec(18, 37), 4, 32, 32);
  comm::BucketPlan buckets = comm::plan_gradient_buckets(plan.parameter_counts(), size_t{1} << 18);
  if (packed) pack_tensors(plan, buckets);
  comm::GradientBuffer<float> gradients(std::move(buckets));
  CpuResNet<float> model(std::move(plan), gradients.views());
  model.initialize(5);
  kernels::SgdOptions options;
  options.lr = 0.1;
  options.momentum = 0.9;
  options.weight_decay = 1e-4;
  std::mt19937 generator(3);
  std::normal_distribution<float> normal;
  std::vector<float> images(static_cast<size_t>(4) * 32 * 32 * 3);
  for (int step = 0; step < 3; ++step) {
    for (auto& value : images) value = normal(generator);
    const std::vector<int32_t> labels = {1, 36, 17, 4};
    model.forward_and_loss(images.data(), labels.data(), 4, 0.1f, 0.5f);
    model.backward({}, {});
    model.sgd_step(options);
  }
  return model.export_state();
}

}  // namespace

TEST_CASE("Aligned tensors train bit-identically to packed ones on the CPU", "[model]") {
  const ExportedTensors aligned = train_three_steps(false);
  const ExportedTensors packed = train_three_steps(true);
  const auto& a = aligned.views();
  const auto& b = packed.views();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i].name);
    REQUIRE(a[i].name == b[i].name);
    REQUIRE(a[i].byte_size() == b[i].byte_size());
    CHECK(std::memcmp(a[i].data, b[i].data, a[i].byte_size()) == 0);
  }
}
