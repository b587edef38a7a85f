// The reducers' shared countdown (runtime/comm/gradient_reducer.h), with a backend that only records what it
// is asked to do: both the MPI and the NCCL reducer start their buckets through it.
#include "runtime/comm/gradient_reducer.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace train::comm;

namespace {

class RecordingReducer final : public GradientReducer {
 public:
  RecordingReducer(BucketPlan plan, std::vector<std::string>& log, bool prepared)
      : GradientReducer(std::move(plan), prepared ? Prepare([&log](size_t begin, size_t end) {
                          log.push_back("prepare " + std::to_string(begin) + "-" + std::to_string(end));
                        })
                                                  : Prepare()),
        log_(log) {}

 private:
  void start_bucket(size_t bucket) override {
    bucket_started(bucket);
    log_.push_back("start " + std::to_string(bucket));
    bucket_finished(bucket);
  }
  void finish_buckets() override { log_.push_back("wait"); }
  std::vector<std::string>& log_;
};

// Five tensors of 300 fp32 elements in buckets of at most 2800 bytes: two tensors (300 elements, padding to
// 384, 300 more: 2736 bytes) fit, three do not: tensors 4 and 3 in bucket 0, 2 and 1 in bucket 1, 0 alone.
BucketPlan five_tensors() { return plan_buckets({300, 300, 300, 300, 300}, 2800, 2800, 4); }

}  // namespace

TEST_CASE("A bucket is prepared and started by the report of its last tensor, in any order", "[buckets]") {
  const BucketPlan plan = five_tensors();
  REQUIRE(plan.buckets.size() == 3);
  std::vector<std::string> log;
  RecordingReducer reducer(plan, log, /*prepared=*/true);
  for (int step = 0; step < 2; ++step) {
    log.clear();
    reducer.begin_step();
    reducer.tensor_ready(3);
    reducer.tensor_ready(1);
    CHECK(log.empty());
    reducer.tensor_ready(4);  // bucket 0's last
    reducer.tensor_ready(0);  // bucket 2 has only tensor 0
    reducer.tensor_ready(2);  // bucket 1's last
    reducer.finish();
    const auto range = [&](size_t b) {
      return std::to_string(plan.buckets[b].begin) + "-" + std::to_string(plan.buckets[b].end);
    };
    CHECK(log == std::vector<std::string>{"prepare " + range(0), "start 0", "prepare " + range(2), "start 2",
                                          "prepare " + range(1), "start 1", "wait"});
  }
}

TEST_CASE("The hooks hear each bucket's start and finish with its bytes, and nothing once unset", "[buckets]") {
  const BucketPlan plan = five_tensors();
  std::vector<std::string> log;
  RecordingReducer reducer(plan, log, /*prepared=*/false);
  std::vector<std::string> heard;
  reducer.set_bucket_hooks(BucketHooks{
      [&](size_t bucket, size_t bytes) { heard.push_back("started " + std::to_string(bucket) + " " + std::to_string(bytes)); },
      [&](size_t bucket, size_t bytes) { heard.push_back("finished " + std::to_string(bucket) + " " + std::to_string(bytes)); }});
  reducer.begin_step();
  for (int p = 4; p >= 0; --p) reducer.tensor_ready(p);
  reducer.finish();
  std::vector<std::string> expected;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    expected.push_back("started " + std::to_string(b) + " " + std::to_string(plan.bytes(b)));
    expected.push_back("finished " + std::to_string(b) + " " + std::to_string(plan.bytes(b)));
  }
  CHECK(heard == expected);
  CHECK(log == std::vector<std::string>{"start 0", "start 1", "start 2", "wait"});

  reducer.set_bucket_hooks({});
  heard.clear();
  reducer.begin_step();
  for (int p = 4; p >= 0; --p) reducer.tensor_ready(p);
  reducer.finish();
  CHECK(heard.empty());
}

TEST_CASE("finish() refuses a step whose buckets did not all receive their tensors, before waiting", "[buckets]") {
  std::vector<std::string> log;
  RecordingReducer reducer(five_tensors(), log, /*prepared=*/false);
  reducer.begin_step();
  for (int p = 4; p >= 1; --p) reducer.tensor_ready(p);  // tensor 0 never reported: bucket 2 never starts
  CHECK_THROWS_WITH(reducer.finish(), Catch::Contains("gradient bucket 2 of 3 was never started") &&
                                          Catch::Contains("reported 0 of its 1 tensors"));
  CHECK(log == std::vector<std::string>{"start 0", "start 1"});
  // A new step starts every countdown again: a bucket started last step is not started this one.
  reducer.begin_step();
  reducer.tensor_ready(0);
  CHECK_THROWS_WITH(reducer.finish(), Catch::Contains("gradient bucket 0 of 3 was never started"));
}
