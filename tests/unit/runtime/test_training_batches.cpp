// File and FastFile mode's batch order (runtime/training_batches.h): which batch each step takes, where each
// epoch ends, and where training ends, as the loop (Trainer::train) is told; the waits told to observers.
// (Pipe mode's vote needs several ranks: tests/data/test_sample_once.py runs it through the real train.)
#include "runtime/data/loader/batch_loader.h"
#include "runtime/training_batches.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

using namespace train;

namespace {

// `count` samples of 2x2 pixels, each labelled by its index.
class CountingSource : public data::SampleSource {
 public:
  explicit CountingSource(int64_t count) : SampleSource(2, 2), count_(count) {}
  int64_t size() const override { return count_; }
  int num_classes() const override { return static_cast<int>(count_); }
  int32_t load(int64_t index, uint64_t, int64_t, float* out, data::SampleScratch&) const override {
    std::fill(out, out + 12, static_cast<float>(index));
    return static_cast<int32_t>(index);
  }
  std::string describe() const override { return "counting"; }

 private:
  int64_t count_;
};

// Counts the waits for a batch it is told of, and the ends of the data.
class WaitCounter final : public TrainingObserver {
 public:
  void batch_arrived(const data::Batch* batch, int64_t waited_from, int64_t arrived) override {
    CHECK(arrived >= waited_from);
    (batch != nullptr ? batches : ends) += 1;
  }
  int batches = 0, ends = 0;
};

// What the loop would do, one letter a step: 'b' a batch (of its epoch), 'E' an epoch's end, 'e' one part-way,
// 'T' the end of training after it; with each batch's epoch and where a restart after it resumes.
struct Walk {
  std::string steps;
  std::vector<int64_t> batch_epochs;
  std::vector<data::DataPosition> resume_at;
};

// `steps_done`: the job's steps before the walk (a resumed job's).
Walk walk(TrainingBatches& batches, int64_t steps_done = 0) {
  Walk walk;
  while (static_cast<int64_t>(walk.steps.size()) < 100) {
    const NextStep next = batches.next(steps_done);
    if (next.ends_epoch) walk.steps += next.complete ? 'E' : 'e';
    if (next.ends_training) {
      walk.steps += 'T';
      break;
    }
    if (next.batch == nullptr) continue;
    CHECK(next.epoch == next.batch->position.epoch);
    CHECK_FALSE(next.padding);
    walk.steps += 'b';
    walk.batch_epochs.push_back(next.epoch);
    walk.resume_at.push_back(next.after);
    ++steps_done;
  }
  return walk;
}

struct Job {
  TrainingSettings settings;
  std::unique_ptr<data::BatchLoader> loader;
  int64_t steps_per_epoch = 0;
};

// 10 samples in batches of 4 (3 steps an epoch, the last of 2), 2 epochs, from `start`.
Job job(const data::DataPosition& start = {}) {
  Job job;
  job.settings.batch_per_rank = 4;
  job.settings.epochs = 2;
  data::LoaderOptions options;
  options.batch_size = 4;
  options.threads = 1;
  options.epochs = 2;
  options.start = start;
  job.loader = std::make_unique<data::BatchLoader>(std::make_shared<CountingSource>(10), options);
  job.steps_per_epoch = job.loader->batches_per_epoch();
  return job;
}

std::unique_ptr<TrainingBatches> file_mode(Job& job, int64_t total_steps, const data::DataPosition& start,
                                           const std::vector<TrainingObserver*>& observers) {
  return make_training_batches(job.settings, RankIdentity{}, MPI_COMM_NULL, std::chrono::milliseconds(1000),
                               std::chrono::seconds(30), *job.loader, start, job.steps_per_epoch, total_steps,
                               observers);
}

}  // namespace

TEST_CASE("training batches: File mode ends each epoch before the next one's first batch, then training", "[trainer]") {
  Job whole = job();
  REQUIRE(whole.steps_per_epoch == 3);
  WaitCounter waits;
  const std::vector<TrainingObserver*> observers{&waits};
  auto batches = file_mode(whole, 6, {}, observers);
  const Walk all = walk(*batches);
  CHECK(all.steps == "bbbEbbbET");
  CHECK(all.batch_epochs == std::vector<int64_t>{0, 0, 0, 1, 1, 1});
  CHECK(all.resume_at.back() == data::DataPosition{2, 0});
  CHECK(all.resume_at[2] == data::DataPosition{1, 0});  // after an epoch's last batch: the next epoch's start
  CHECK(waits.batches == 6);
  CHECK(waits.ends == 0);  // training ends at its last step, before the loader is asked again
}

TEST_CASE("training batches: max_steps ends training part-way through an epoch, or with it", "[trainer]") {
  Job partway = job();
  auto batches = file_mode(partway, 4, {}, {});
  CHECK(walk(*batches).steps == "bbbEbeT");  // the second epoch ends part-way: no end-of-epoch checkpoint
  Job at_end = job();
  batches = file_mode(at_end, 3, {}, {});
  CHECK(walk(*batches).steps == "bbbET");  // the last step ends an epoch whole
}

TEST_CASE("training batches: a resumed job goes on where its checkpoint left off", "[trainer]") {
  const data::DataPosition start{0, 8};  // after the first epoch's second batch (4 images a batch)
  Job resumed = job(start);
  auto batches = file_mode(resumed, 6, start, {});
  const Walk rest = walk(*batches, /*steps_done=*/2);
  CHECK(rest.steps == "bEbbbET");
  CHECK(rest.batch_epochs == std::vector<int64_t>{0, 1, 1, 1});
}

TEST_CASE("training batches: the data ending before total_steps ends training with its epoch", "[trainer]") {
  Job short_data = job();
  WaitCounter waits;
  const std::vector<TrainingObserver*> observers{&waits};
  auto batches = file_mode(short_data, 100, {}, observers);
  CHECK(walk(*batches).steps == "bbbEbbbET");
  CHECK(waits.ends == 1);  // the loader said the data ended: told to the observers as a wait with no batch
}
