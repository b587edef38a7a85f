#include "runtime/comm/gradient_buckets.h"
#include "runtime/learning_rate.h"

#include <catch2/catch.hpp>

#include <numeric>

using namespace train;

namespace {

// Every tensor in exactly one bucket, buckets contiguous and in reverse forward order.
void check_plan_covers(const BucketPlan& plan, const std::vector<size_t>& sizes) {
  size_t expected_offset = 0;
  int expected_tensor = static_cast<int>(sizes.size()) - 1;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const auto& bucket = plan.buckets[b];
    REQUIRE(bucket.begin == expected_offset);
    REQUIRE_FALSE(bucket.tensors.empty());
    for (int tensor : bucket.tensors) {
      REQUIRE(tensor == expected_tensor--);
      REQUIRE(plan.offset_of_tensor[static_cast<size_t>(tensor)] == expected_offset);
      REQUIRE(plan.bucket_of_tensor[static_cast<size_t>(tensor)] == static_cast<int>(b));
      expected_offset += sizes[static_cast<size_t>(tensor)];
    }
    REQUIRE(bucket.end == expected_offset);
  }
  REQUIRE(expected_tensor == -1);
  REQUIRE(plan.total_elements == std::accumulate(sizes.begin(), sizes.end(), size_t{0}));
}

}  // namespace

TEST_CASE("Bucket plans cover every tensor once in reverse order", "[buckets]") {
  std::vector<size_t> sizes = {9408, 64, 64, 36864, 64, 64, 147456, 256, 256, 2048000, 1000};
  for (size_t threshold : {size_t{4}, size_t{1000}, size_t{40000}, size_t{123457}, size_t{1} << 30}) {
    auto plan = plan_buckets(sizes, threshold, 4096);
    check_plan_covers(plan, sizes);
    for (const auto& bucket : plan.buckets) {
      // A bucket exceeds the threshold only when it is a single tensor larger than it.
      if ((bucket.end - bucket.begin) * sizeof(float) > threshold) CHECK(bucket.tensors.size() == 1);
    }
  }
}

TEST_CASE("A threshold smaller than any tensor gives one bucket per tensor", "[buckets]") {
  std::vector<size_t> sizes = {10, 20, 30};
  auto plan = plan_buckets(sizes, 4, 4);
  CHECK(plan.buckets.size() == 3);
}

TEST_CASE("A threshold larger than everything gives the small first bucket and one more", "[buckets]") {
  std::vector<size_t> sizes = {1000, 1000, 1000, 10};
  auto plan = plan_buckets(sizes, size_t{1} << 30, 4040);
  REQUIRE(plan.buckets.size() == 2);
  CHECK(plan.buckets[0].tensors == std::vector<int>{3, 2});
  CHECK(plan.buckets[1].tensors == std::vector<int>{1, 0});
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
