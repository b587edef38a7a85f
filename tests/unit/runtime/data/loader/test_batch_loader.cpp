#include "runtime/data/data_error.h"
#include "runtime/data/loader/batch_loader.h"
#include "runtime/data/loader/sampler.h"
#include "tests/unit/test_data_batches.h"
#include "tests/unit/test_data_helpers.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <filesystem>
#include <map>
#include <thread>

using train::Augmentation;
using namespace train::data;
using train::data::testing::drain;
using train::data::testing::require_same_batches;
using train::data::testing::TempDir;
using namespace std::chrono_literals;

namespace {

// A folder of 3 classes with JPEGs and PNGs of assorted sizes (13 images).
void make_folder(const TempDir& dir) {
  int n = 0;
  for (const char* cls : {"cat", "dog", "emu"}) {
    dir.mkdir(std::string("root/") + cls);
    for (int i = 0; i < 4 + (cls[0] == 'd'); ++i, ++n) {
      const std::string stem = dir / (std::string("root/") + cls + "/" + std::to_string(i));
      const int w = 40 + 7 * n, h = 30 + 5 * (n % 4);
      if (n % 3 == 0) {
        testing::write_png(stem + ".png", w, h, n);
      } else {
        testing::write_jpeg(stem + ".jpg", w, h, n, {.quality = 85, .progressive = n % 4 == 1});
      }
    }
  }
}

std::shared_ptr<const SampleSource> folder_source(const TempDir& dir, Augmentation augmentation, int size = 16) {
  ImageFolderOptions options;
  options.height = options.width = size;
  options.augmentation = augmentation;
  return std::make_shared<ImageFolderSource>(scan_image_folder(dir / "root"), options);
}

// Sleeps in load(): for timeouts and stopping.
class SlowSource : public SampleSource {
 public:
  explicit SlowSource(std::chrono::milliseconds delay) : SampleSource(2, 2), delay_(delay) {}
  int64_t size() const override { return 1000; }
  int num_classes() const override { return 2; }
  int32_t load(int64_t index, uint64_t, int64_t, float* out, SampleScratch&) const override {
    std::this_thread::sleep_for(delay_);
    std::fill(out, out + 12, static_cast<float>(index));
    ++loads;
    return static_cast<int32_t>(index % 2);
  }
  std::string describe() const override { return "slow"; }
  mutable std::atomic<int> loads{0};

 private:
  std::chrono::milliseconds delay_;
};

// Sample 0's load blocks until release() (a read that never returns, as on a stalled network file
// system); the others load at once.
class StuckSource : public SampleSource {
 public:
  StuckSource() : SampleSource(2, 2) {}
  int64_t size() const override { return 8; }
  int num_classes() const override { return 2; }
  int32_t load(int64_t index, uint64_t, int64_t, float* out, SampleScratch&) const override {
    if (index == 0) {
      std::unique_lock<std::mutex> lock(mutex_);
      stuck_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return released_; });
      stuck_ = false;
      changed_.notify_all();
    }
    std::fill(out, out + 12, static_cast<float>(index));
    return static_cast<int32_t>(index % 2);
  }
  std::string describe() const override { return "stuck"; }
  std::string sample_name(int64_t index) const override { return "/mnt/stalled/" + std::to_string(index) + ".jpg"; }
  void wait_until_stuck() const {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return stuck_; });
  }
  bool stuck() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stuck_;
  }
  void release() const {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  mutable bool stuck_ = false, released_ = false;
};

}  // namespace

TEST_CASE("loader: batches of the shard, NHWC floats and labels, epochs in a row, then the end", "[data]") {
  TempDir dir;
  make_folder(dir);
  auto source = folder_source(dir, Augmentation::crop);
  const auto& folder = static_cast<const ImageFolderSource&>(*source).folder();
  REQUIRE(folder.size() == 13);
  LoaderOptions options;
  options.batch_size = 5;
  options.threads = 2;
  options.epochs = 2;
  options.seed = 9;
  BatchLoader loader(source, options);
  CHECK(loader.shard_size() == 13);
  CHECK(loader.batches_per_epoch() == 3);
  CHECK(loader.position() == DataPosition{0, 0});
  const auto batches = drain(loader);
  REQUIRE(batches.size() == 6);
  CHECK(batches[2].size == 3);  // the epoch's last, partial batch
  CHECK(batches[2].next == DataPosition{1, 0});
  CHECK(batches[3].position == DataPosition{1, 0});
  CHECK(batches[5].next == DataPosition{2, 0});
  CHECK(loader.position() == DataPosition{2, 0});
  for (int epoch = 0; epoch < 2; ++epoch) {
    const auto shard = epoch_shard(13, 9, epoch, true, 0, 1);
    std::vector<int64_t> seen;
    for (int b = 0; b < 3; ++b) {
      const Batch& batch = batches[epoch * 3 + b];
      CHECK(batch.height == 16);
      CHECK(batch.width == 16);
      CHECK(batch.images.size() == static_cast<size_t>(batch.size) * 16 * 16 * 3);
      for (int i = 0; i < batch.size; ++i) {
        seen.push_back(batch.samples[i]);
        CHECK(batch.labels[i] == folder.labels[static_cast<size_t>(batch.samples[i])]);
      }
      for (float value : batch.images) {
        REQUIRE(value >= normalised_value(0, 0) - 1e-6f);
        REQUIRE(value <= normalised_value(2, 255) + 1e-6f);
      }
    }
    CHECK(seen == shard);
  }
  Batch batch;
  CHECK(loader.next(batch, 1s) == BatchLoader::Status::end);
}

TEST_CASE("loader: the same seed gives bit-identical batches with 1 or 3 threads", "[data]") {
  TempDir dir;
  make_folder(dir);
  auto source = folder_source(dir, Augmentation::crop, 24);
  LoaderOptions options;
  options.batch_size = 4;
  options.epochs = 3;
  options.seed = 1234;
  options.threads = 1;
  options.prefetch_batches = 1;
  BatchLoader one(source, options);
  options.threads = 3;
  options.prefetch_batches = 3;
  BatchLoader three(source, options);
  const auto a = drain(one), b = drain(three);
  require_same_batches(a, b);
  // Another epoch augments differently: sample 0's image in epoch 0 and epoch 1 differ.
  std::map<int64_t, const float*> first_epoch;
  int compared = 0;
  for (const auto& batch : a) {
    for (int i = 0; i < batch.size; ++i) {
      const float* image = batch.images.data() + static_cast<size_t>(i) * 24 * 24 * 3;
      if (batch.position.epoch == 0) first_epoch[batch.samples[i]] = image;
      if (batch.position.epoch == 1) {
        REQUIRE(first_epoch.count(batch.samples[i]));
        CHECK(!std::equal(image, image + 24 * 24 * 3, first_epoch[batch.samples[i]]));
        ++compared;
      }
    }
  }
  CHECK(compared == 13);
  // And another seed differs from the first batch on.
  options.seed = 1235;
  BatchLoader other(source, options);
  const auto c = drain(other, 1);
  CHECK(c[0].images != a[0].images);
}

TEST_CASE("loader: resuming from a checkpointed position yields the same remaining batches", "[data]") {
  TempDir dir;
  make_folder(dir);
  auto source = folder_source(dir, Augmentation::crop);
  LoaderOptions options;
  options.batch_size = 3;
  options.threads = 2;
  options.epochs = 3;
  options.rank = 1;
  options.ranks = 2;  // 7 samples per epoch on this rank
  BatchLoader full(source, options);
  const auto all = drain(full);
  REQUIRE(all.size() == 9);  // 3 epochs of 3, 3, 1
  for (size_t k : {size_t{1}, size_t{3}, size_t{5}}) {
    INFO("resuming after batch " << k);
    options.start = all[k].next;
    BatchLoader resumed(source, options);
    CHECK(resumed.position() == all[k].next);
    require_same_batches(std::vector<Batch>(all.begin() + static_cast<ptrdiff_t>(k) + 1, all.end()), drain(resumed));
  }
  // A position between batch boundaries works too: the batches are cut from there.
  options.start = DataPosition{1, 2};
  BatchLoader odd(source, options);
  const auto rest = drain(odd);
  REQUIRE(rest.size() == 2 + 3);
  CHECK(rest[0].position == DataPosition{1, 2});
  const auto shard = epoch_shard(13, options.seed, 1, true, 1, 2);
  CHECK(rest[0].samples == std::vector<int64_t>(shard.begin() + 2, shard.begin() + 5));
  CHECK(rest[1].samples == std::vector<int64_t>(shard.begin() + 5, shard.end()));
  CHECK(rest[2].position == DataPosition{2, 0});
  // The end of an epoch is the start of the next.
  options.start = DataPosition{0, 7};
  BatchLoader boundary(source, options);
  CHECK(boundary.position() == DataPosition{1, 0});
  options.start = DataPosition{0, 8};
  REQUIRE_THROWS_AS(BatchLoader(source, options), std::invalid_argument);
}

TEST_CASE("loader: every sample exactly once per epoch across ranks (synthetic data)", "[data]") {
  auto source = std::make_shared<SyntheticSource>(29, 5, 4, 4);
  for (int ranks : {1, 3, 8}) {
    INFO("ranks " << ranks);
    std::map<int64_t, int> seen;
    int64_t batches = -1;
    for (int rank = 0; rank < ranks; ++rank) {
      BatchLoader loader(source, {.batch_size = 2, .threads = 2, .rank = rank, .ranks = ranks, .epochs = 1});
      const auto all = drain(loader);
      if (batches < 0) batches = static_cast<int64_t>(all.size());
      CHECK(static_cast<int64_t>(all.size()) == batches);  // the same number of steps on every rank
      for (const auto& batch : all) {
        for (int i = 0; i < batch.size; ++i) ++seen[batch.samples[i]];
      }
    }
    CHECK(seen.size() == 29);
    int extra = 0;
    for (auto [sample, count] : seen) extra += count - 1;
    CHECK(extra == (29 + ranks - 1) / ranks * ranks - 29);
  }
}

TEST_CASE("synthetic source: deterministic noise and labels in range", "[data]") {
  SyntheticSource source(100, 7, 8, 6);
  SampleScratch scratch;
  std::vector<float> a(8 * 6 * 3), b(a.size()), c(a.size());
  const int32_t label = source.load(5, 1, 0, a.data(), scratch);
  CHECK(label == source.load(5, 1, 3, b.data(), scratch));  // the same in every epoch
  CHECK(a == b);
  source.load(6, 1, 0, c.data(), scratch);
  CHECK(a != c);
  for (int i = 0; i < 100; ++i) {
    const int32_t l = source.load(i, 1, 0, c.data(), scratch);
    CHECK(l >= 0);
    CHECK(l < 7);
  }
}

TEST_CASE("loader: drop_last drops the partial batch on every rank", "[data]") {
  auto source = std::make_shared<SyntheticSource>(11, 2, 2, 2);
  LoaderOptions options;
  options.batch_size = 4;
  options.drop_last = true;
  options.epochs = 2;
  BatchLoader loader(source, options);
  CHECK(loader.batches_per_epoch() == 2);
  const auto all = drain(loader);
  REQUIRE(all.size() == 4);
  CHECK(all[1].next == DataPosition{1, 0});
  options.batch_size = 12;
  REQUIRE_THROWS_AS(BatchLoader(source, options), DataError);
}

TEST_CASE("loader: a corrupt file fails next() with its path, and keeps failing", "[data]") {
  TempDir dir;
  make_folder(dir);
  const std::string bad = dir / "root/dog/zz-bad.jpg";
  write_file(bad, {0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x01, 0x02});
  auto source = folder_source(dir, Augmentation::crop);
  LoaderOptions options;
  options.batch_size = 4;
  options.threads = 3;
  options.shuffle = false;
  BatchLoader loader(source, options);
  // dog/zz-bad.jpg is sample 9 of 14: batches 0 and 1 are fine, batch 2 fails.
  Batch batch;
  REQUIRE(loader.next(batch, 30s) == BatchLoader::Status::batch);
  REQUIRE(loader.next(batch, 30s) == BatchLoader::Status::batch);
  REQUIRE_THROWS_AS(loader.next(batch, 30s), DataError);
  REQUIRE_THROWS_WITH(loader.next(batch, 30s), Catch::StartsWith(bad) && Catch::Contains("not a decodable JPEG"));
}

TEST_CASE("loader: a file that disappeared fails with its path", "[data]") {
  TempDir dir;
  make_folder(dir);
  auto source = folder_source(dir, Augmentation::none);
  const std::string gone = static_cast<const ImageFolderSource&>(*source).folder().paths[0];
  std::filesystem::remove(gone);
  LoaderOptions options;
  options.batch_size = 13;
  BatchLoader loader(source, options);
  Batch batch;
  REQUIRE_THROWS_WITH(loader.next(batch, 30s), Catch::StartsWith(gone) && Catch::Contains("cannot open"));
}

TEST_CASE("loader: waits are bounded and stop() ends them, the destructor joins promptly", "[data]") {
  auto source = std::make_shared<SlowSource>(20ms);
  LoaderOptions options;
  options.batch_size = 8;
  options.threads = 2;
  options.prefetch_batches = 2;
  auto start = std::chrono::steady_clock::now();
  {
    BatchLoader loader(source, options);
    Batch batch;
    CHECK(loader.next(batch, 1ms) == BatchLoader::Status::timed_out);
    REQUIRE(loader.next(batch, 10s) == BatchLoader::Status::batch);
    std::thread stopper([&] {
      std::this_thread::sleep_for(5ms);
      loader.stop();
    });
    // Whatever was in flight, next() returns promptly once stopped.
    BatchLoader::Status status;
    do {
      status = loader.next(batch, 10s);
    } while (status == BatchLoader::Status::batch);
    stopper.join();
    CHECK(status == BatchLoader::Status::stopped);
  }
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  // The queue is bounded: with nobody consuming, at most prefetch_batches batches get decoded.
  auto idle = std::make_shared<SlowSource>(1ms);
  {
    BatchLoader loader(idle, options);
    std::this_thread::sleep_for(300ms);
    CHECK(idle->loads.load() == options.prefetch_batches * options.batch_size);
  }
}

TEST_CASE("loader: a load that never returns is named, and the destructor leaves its thread behind", "[data]") {
  auto source = std::make_shared<StuckSource>();
  std::weak_ptr<const SampleSource> watched = source;
  LoaderOptions options;
  options.batch_size = 4;
  options.threads = 2;
  options.shuffle = false;
  {
    BatchLoader loader(source, options);
    source->wait_until_stuck();
    Batch batch;
    CHECK(loader.next(batch, 50ms) == BatchLoader::Status::timed_out);
    const auto stalled = loader.stalled_samples(0ms);
    REQUIRE(stalled.size() == 1);
    CHECK_THAT(stalled[0], Catch::StartsWith("/mnt/stalled/0.jpg (a read that has not returned for "));
    CHECK(loader.stalled_samples(1h).empty());
  }
  // The destructor returned with the load still blocked: its thread was left behind, holding what it uses.
  CHECK(source->stuck());
  source->release();
  source.reset();
  // Once the load returns, the abandoned thread ends and lets go of the loader's state and the source.
  for (int i = 0; i < 1000 && !watched.expired(); ++i) std::this_thread::sleep_for(10ms);
  CHECK(watched.expired());
}
