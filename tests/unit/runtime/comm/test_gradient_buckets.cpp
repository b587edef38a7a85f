#include "runtime/comm/gradient_buckets.h"
#include "runtime/learning_rate.h"
#include "runtime/model/resnet_plan.h"

#include <catch2/catch.hpp>

#include <numeric>

using namespace train;
using namespace train::comm;

namespace {

// Every tensor in exactly one bucket at an aligned offset, after the previous tensor's end; buckets in
// reverse forward order, each from its first tensor's offset to its last tensor's end.
void check_plan_covers(const BucketPlan& plan, const std::vector<size_t>& sizes) {
  size_t previous_end = 0;
  int expected_tensor = static_cast<int>(sizes.size()) - 1;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const auto& bucket = plan.buckets[b];
    REQUIRE_FALSE(bucket.tensors.empty());
    REQUIRE(bucket.begin == plan.offset_of_tensor[static_cast<size_t>(bucket.tensors.front())]);
    for (int tensor : bucket.tensors) {
      REQUIRE(tensor == expected_tensor--);
      const size_t offset = plan.offset_of_tensor[static_cast<size_t>(tensor)];
      REQUIRE(offset % tensor_alignment_elements == 0);
      REQUIRE(offset >= previous_end);
      REQUIRE(offset - previous_end < tensor_alignment_elements);  // padding only, never a gap
      REQUIRE(plan.bucket_of_tensor[static_cast<size_t>(tensor)] == static_cast<int>(b));
      previous_end = offset + sizes[static_cast<size_t>(tensor)];
    }
    REQUIRE(bucket.end == previous_end);
  }
  REQUIRE(expected_tensor == -1);
  REQUIRE(plan.total_elements >= previous_end);
  REQUIRE(plan.total_elements % tensor_alignment_elements == 0);
  REQUIRE(plan.total_elements < std::accumulate(sizes.begin(), sizes.end(), size_t{0}) +
                                    sizes.size() * tensor_alignment_elements);
}

}  // namespace

TEST_CASE("Bucket plans cover every tensor once in reverse order", "[buckets]") {
  std::vector<size_t> sizes = {9408, 64, 64, 36864, 64, 64, 147456, 256, 256, 2048000, 1000};
  for (size_t element_bytes : {size_t{4}, size_t{2}}) {
    for (size_t threshold : {size_t{4}, size_t{1000}, size_t{40000}, size_t{123457}, size_t{1} << 30}) {
      auto plan = plan_buckets(sizes, threshold, 4096, element_bytes);
      CAPTURE(element_bytes, threshold);
      check_plan_covers(plan, sizes);
      CHECK(plan.element_bytes == element_bytes);
      for (const auto& bucket : plan.buckets) {
        // A bucket exceeds the threshold only when it is a single tensor larger than it.
        if ((bucket.end - bucket.begin) * element_bytes > threshold) CHECK(bucket.tensors.size() == 1);
      }
    }
  }
}

TEST_CASE("A threshold smaller than any tensor gives one bucket per tensor", "[buckets]") {
  std::vector<size_t> sizes = {10, 20, 30};
  auto plan = plan_buckets(sizes, 4, 4, 4);
  CHECK(plan.buckets.size() == 3);
}

TEST_CASE("A threshold larger than everything gives the small first bucket and one more", "[buckets]") {
  // 4-byte elements: tensors 3 and 2 at offsets 0 and 128 end at 1128 elements = 4512 bytes.
  std::vector<size_t> sizes = {1000, 1000, 1000, 10};
  auto plan = plan_buckets(sizes, size_t{1} << 30, 4600, 4);
  REQUIRE(plan.buckets.size() == 2);
  CHECK(plan.buckets[0].tensors == std::vector<int>{3, 2});
  CHECK(plan.buckets[1].tensors == std::vector<int>{1, 0});
}

TEST_CASE("Buckets are sized by the bytes of the elements they send", "[buckets]") {
  // 2-byte elements hold twice as many elements under the same threshold: bf16 buckets are not half size.
  std::vector<size_t> sizes(64, 1024);
  const auto fp32 = plan_buckets(sizes, 16 * 1024, 16 * 1024, 4);
  const auto bf16 = plan_buckets(sizes, 16 * 1024, 16 * 1024, 2);
  CHECK(fp32.buckets.size() == 16);
  CHECK(bf16.buckets.size() == 8);
  for (const auto& bucket : bf16.buckets) CHECK((bucket.end - bucket.begin) * 2 <= 16 * 1024);
}

TEST_CASE("Every gradient and parameter of ResNet-50 is 256-byte aligned for any class count", "[buckets]") {
  // Packed back to back from fc.bias, every tensor after it was offset by num_classes elements.
  for (int classes : {10, 37, 101, 257, 1000}) {
    const model::ResNetPlan plan = model::plan_resnet(model::build_resnet_spec(50, classes), 2, 64, 64);
    const BucketPlan buckets = plan_gradient_buckets(plan.parameter_counts(), size_t{25} << 20);
    CAPTURE(classes);
    for (int p = 0; p < plan.parameter_tensors(); ++p) {
      const auto& slot = plan.parameters[static_cast<size_t>(p)];
      // bf16 (2 bytes) and fp32 (4 bytes) buffers alike
      CHECK(slot.offset * 2 % 256 == 0);
      CHECK(buckets.offset_of_tensor[static_cast<size_t>(p)] * 2 % 256 == 0);
      if (p + 1 < plan.parameter_tensors()) {
        CHECK(plan.parameters[static_cast<size_t>(p) + 1].offset >= slot.offset + static_cast<size_t>(slot.count));
      }
    }
    CHECK(plan.parameter_elements % tensor_alignment_elements == 0);
  }
}

TEST_CASE("Learning rate: warm-up, then cosine, poly and step decay", "[schedule]") {
  LearningRateSchedule schedule;
  schedule.peak = 0.4;
  schedule.warmup_steps = 4;
  schedule.total_steps = 104;
  schedule.steps_per_epoch = 10;
  CHECK(schedule.at(0) == Approx(0.1));
  CHECK(schedule.at(3) == Approx(0.4));
  CHECK(schedule.at(4) == Approx(0.4));
  CHECK(schedule.at(54) == Approx(0.2));
  CHECK(schedule.at(104) == Approx(0.0).margin(1e-12));
  schedule.decay = LrDecay::poly;
  CHECK(schedule.at(54) == Approx(0.1));
  schedule.decay = LrDecay::step;
  schedule.step_epochs = {3, 6};
  schedule.step_factor = 0.1;
  CHECK(schedule.at(29) == Approx(0.4));
  CHECK(schedule.at(30) == Approx(0.04));
  CHECK(schedule.at(65) == Approx(0.004));
  CHECK(scaled_peak_learning_rate(0.1, 1024) == Approx(0.4));
}
