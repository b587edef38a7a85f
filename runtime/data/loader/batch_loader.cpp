#include "runtime/data/loader/batch_loader.h"

#include "common/log.h"

#include "runtime/data/data_error.h"
#include "runtime/data/loader/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace train::data {

namespace {

// One batch in the making: a slot of the ring of prefetch_batches that the threads fill in turn.
struct BatchSlot {
  enum class State { free, preparing, filling };
  State state = State::free;
  int64_t sequence = -1;
  Batch batch;
  std::shared_ptr<const std::vector<int64_t>> shard;
  std::vector<FedRecord> records;  // with a feed: the batch's encoded images (storage reused)
  int dispatched = 0;  // samples handed to a thread
  int finished = 0;    // samples done (successfully or not)
  std::exception_ptr error;
  int error_at = INT_MAX;  // the failed sample's place in the batch: the first one is reported
};

}  // namespace

class BatchLoader::SharedState {
 public:
  SharedState(std::shared_ptr<const SampleSource> source, const LoaderOptions& options);
  SharedState(std::shared_ptr<RecordFeed> feed, const ImageFolderOptions& image, const LoaderOptions& options);

  void work(int worker);
  void fetch();  // with a feed: fills slots in order
  // Called by each thread as the last thing it does with the loader.
  void exited();
  // Waits for every thread to have exited, giving each sample in hand `limit` since its load began (and an idle
  // thread `limit` to wake and go); true when they all have.
  bool wait_exited(int threads, std::chrono::milliseconds limit);
  Status next(Batch& batch, std::chrono::milliseconds timeout);
  void stop();
  std::vector<std::string> stalled_samples(std::chrono::milliseconds longer_than) const;
  DataPosition position() const;
  int64_t batches_per_epoch() const;

  std::shared_ptr<const SampleSource> source_;
  std::shared_ptr<RecordFeed> feed_;
  ImageFolderOptions fed_image_;
  int height_ = 0, width_ = 0;
  LoaderOptions options_;
  int64_t shard_size_ = 0;

 private:
  struct SampleInHand {  // a sample a thread is loading; -1: none
    int64_t sample = -1;
    std::chrono::steady_clock::time_point since;
  };
  void decode_fed(BatchSlot& slot, int place, SampleScratch& scratch, float* out, int32_t* label);
  bool plan_next(Batch& batch);  // fills position, next and size of the next batch; false at the end
  std::shared_ptr<const std::vector<int64_t>> shard_for(int64_t epoch);
  DataPosition normalise(DataPosition position) const;

  mutable std::mutex mutex_;
  std::condition_variable workers_wake_;
  std::condition_variable consumer_wake_;
  std::condition_variable exits_;
  std::vector<std::unique_ptr<BatchSlot>> slots_;
  int64_t planned_ = 0;    // batches planned so far (sequence numbers 0..planned_-1)
  int64_t consumed_ = 0;   // batches handed to the caller
  bool plan_done_ = false;
  DataPosition plan_position_;   // where the next planned batch starts
  DataPosition consumer_position_;
  bool stop_ = false;
  std::exception_ptr failure_;
  int exited_ = 0;                    // threads that have exited
  std::vector<SampleInHand> loading_;      // per worker, the sample in its hands (not with a feed)

  std::mutex shard_mutex_;  // never taken while holding mutex_'s work
  int64_t shard_epoch_ = -1;
  std::shared_ptr<const std::vector<int64_t>> shard_;
};

namespace {

void check_common_options(const LoaderOptions& options) {
  if (options.batch_size < 1) {
    throw std::invalid_argument(fmt::format("data loader: batch size must be at least 1, got {}", options.batch_size));
  }
  if (options.threads < 1 || options.threads > 256) {
    throw std::invalid_argument(fmt::format("data loader: threads must be 1 to 256, got {}", options.threads));
  }
  if (options.prefetch_batches < 1) {
    throw std::invalid_argument(
        fmt::format("data loader: prefetch_batches must be at least 1, got {}", options.prefetch_batches));
  }
  if (options.ranks < 1 || options.rank < 0 || options.rank >= options.ranks) {
    throw std::invalid_argument(fmt::format("data loader: rank {} is not in [0, {})", options.rank, options.ranks));
  }
  if (options.start.epoch < 0 || options.start.index < 0 || options.epochs < 0 || options.samples_per_epoch < 0) {
    throw std::invalid_argument(
        fmt::format("data loader: start position (epoch {}, index {}), epochs {} or samples per epoch {} is negative",
                    options.start.epoch, options.start.index, options.epochs, options.samples_per_epoch));
  }
}

}  // namespace

BatchLoader::SharedState::SharedState(std::shared_ptr<const SampleSource> source, const LoaderOptions& options)
    : source_(std::move(source)), options_(options) {
  if (!source_) throw std::invalid_argument("data loader: no sample source");
  check_common_options(options_);
  loading_.resize(static_cast<size_t>(options_.threads));
  height_ = source_->height();
  width_ = source_->width();
  if (source_->size() < 1) throw DataError("data loader: the data set is empty");
  shard_size_ = data::shard_size(source_->size(), options_.ranks);
  if (options_.samples_per_epoch > 0) {
    if (options_.samples_per_epoch < shard_size_) {
      throw std::invalid_argument(fmt::format("data loader: {} samples per epoch per rank leaves samples of {} unread "
                                              "by {} ranks",
                                              options_.samples_per_epoch, source_->size(), options_.ranks));
    }
    shard_size_ = options_.samples_per_epoch;
  }
  if (options_.drop_last && shard_size_ < options_.batch_size) {
    throw DataError(fmt::format(
        "data loader: each of the {} ranks gets {} samples per epoch, fewer than one batch of {}; with drop_last no "
        "batch would ever be produced",
        options_.ranks, shard_size_, options_.batch_size));
  }
  if (options_.start.index > shard_size_) {
    throw std::invalid_argument(fmt::format("data loader: start index {} is past this rank's {} samples per epoch",
                                            options_.start.index, shard_size_));
  }
  plan_position_ = normalise(options_.start);
  consumer_position_ = plan_position_;
  for (int i = 0; i < options_.prefetch_batches; ++i) slots_.push_back(std::make_unique<BatchSlot>());
}

BatchLoader::SharedState::SharedState(std::shared_ptr<RecordFeed> feed, const ImageFolderOptions& image,
                                      const LoaderOptions& options)
    : feed_(std::move(feed)), fed_image_(image), options_(options) {
  if (!feed_) throw std::invalid_argument("data loader: no record feed");
  check_common_options(options_);
  height_ = image.height;
  width_ = image.width;
  shard_size_ = options_.samples_per_epoch;
  plan_position_ = options_.start;
  consumer_position_ = plan_position_;
  for (int i = 0; i < options_.prefetch_batches; ++i) slots_.push_back(std::make_unique<BatchSlot>());
}

BatchLoader::BatchLoader(std::shared_ptr<const SampleSource> source, const LoaderOptions& options)
    : shared_(std::make_shared<SharedState>(std::move(source), options)) {
  start_threads();
}

BatchLoader::BatchLoader(std::shared_ptr<RecordFeed> feed, const ImageFolderOptions& image, const LoaderOptions& options)
    : shared_(std::make_shared<SharedState>(std::move(feed), image, options)) {
  start_threads();
}

// Each thread owns a share of the shared state (std::shared_ptr), so that one left behind by the destructor
// still has it.
void BatchLoader::start_threads() {
  threads_.reserve(static_cast<size_t>(shared_->options_.threads) + 1);
  try {
    for (int i = 0; i < shared_->options_.threads; ++i) {
      threads_.emplace_back([shared = shared_, i] {
        shared->work(i);
        shared->exited();
      });
    }
    if (shared_->feed_) {
      threads_.emplace_back([shared = shared_] {
        shared->fetch();
        shared->exited();
      });
    }
  } catch (...) {
    shared_->stop();
    for (auto& thread : threads_) thread.join();
    throw;
  }
}

BatchLoader::~BatchLoader() {
  shared_->stop();
  if (shared_->wait_exited(static_cast<int>(threads_.size()), abandon_after)) {
    for (auto& thread : threads_) thread.join();
    return;
  }
  // A thread blocked in a system call cannot be interrupted, and joining it would hold the rank (and its
  // report of why it fails) hostage for as long as the call: leave it with its share of the shared state.
  const std::vector<std::string> busy = shared_->stalled_samples(std::chrono::milliseconds(0));
  log_error("data loader: a thread still waits for {}; it is left behind",
            busy.empty() ? std::string("the record stream") : busy.front());
  for (auto& thread : threads_) thread.detach();
}

void BatchLoader::stop() { shared_->stop(); }
DataPosition BatchLoader::position() const { return shared_->position(); }
int64_t BatchLoader::shard_size() const { return shared_->shard_size_; }
int64_t BatchLoader::batches_per_epoch() const { return shared_->batches_per_epoch(); }
const SampleSource& BatchLoader::source() const { return *shared_->source_; }
const LoaderOptions& BatchLoader::options() const { return shared_->options_; }
BatchLoader::Status BatchLoader::next(Batch& batch, std::chrono::milliseconds timeout) {
  return shared_->next(batch, timeout);
}
std::vector<std::string> BatchLoader::stalled_samples(std::chrono::milliseconds longer_than) const {
  return shared_->stalled_samples(longer_than);
}

void BatchLoader::SharedState::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  if (feed_) feed_->stop();
  workers_wake_.notify_all();
  consumer_wake_.notify_all();
}

void BatchLoader::SharedState::exited() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++exited_;
  exits_.notify_all();
}

bool BatchLoader::SharedState::wait_exited(int threads, std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  // A load that has already lasted `limit` (the data timeout fired on it, say) is not waited for again.
  const bool loading =
      std::any_of(loading_.begin(), loading_.end(), [](const SampleInHand& l) { return l.sample >= 0; });
  auto deadline = now + (loading ? std::chrono::milliseconds(100) : limit);
  for (const SampleInHand& load : loading_) {
    if (load.sample >= 0) deadline = std::max(deadline, load.since + limit);
  }
  return exits_.wait_until(lock, deadline, [&] { return exited_ == threads; });
}

std::vector<std::string> BatchLoader::SharedState::stalled_samples(std::chrono::milliseconds longer_than) const {
  std::vector<SampleInHand> found;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const SampleInHand& loading : loading_) {
      if (loading.sample >= 0 && now - loading.since >= longer_than) found.push_back(loading);
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const SampleInHand& a, const SampleInHand& b) { return a.since < b.since; });
  std::vector<std::string> names;
  for (const SampleInHand& loading : found) {
    names.push_back(fmt::format("{} (a read that has not returned for {} s)", source_->sample_name(loading.sample),
                                std::chrono::duration_cast<std::chrono::seconds>(now - loading.since).count()));
  }
  return names;
}

int64_t BatchLoader::SharedState::batches_per_epoch() const {
  const int64_t b = options_.batch_size;
  return options_.drop_last ? shard_size_ / b : (shard_size_ + b - 1) / b;
}

DataPosition BatchLoader::SharedState::position() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return consumer_position_;
}

// Moves a position that has no batch left in its epoch to the start of the next epoch.
DataPosition BatchLoader::SharedState::normalise(DataPosition position) const {
  const int64_t left = shard_size_ - position.index;
  if (left <= 0 || (options_.drop_last && left < options_.batch_size)) return DataPosition{position.epoch + 1, 0};
  return position;
}

bool BatchLoader::SharedState::plan_next(Batch& batch) {
  if (plan_done_) return false;
  if (options_.epochs > 0 && plan_position_.epoch >= options_.epochs) {
    plan_done_ = true;
    return false;
  }
  batch.position = plan_position_;
  const int real = static_cast<int>(std::min<int64_t>(options_.batch_size, shard_size_ - plan_position_.index));
  batch.size = std::max(real, std::min(options_.min_batch, options_.batch_size));
  batch.next = normalise(DataPosition{plan_position_.epoch, plan_position_.index + real});
  plan_position_ = batch.next;
  return true;
}

std::shared_ptr<const std::vector<int64_t>> BatchLoader::SharedState::shard_for(int64_t epoch) {
  std::lock_guard<std::mutex> lock(shard_mutex_);
  if (shard_epoch_ != epoch || !shard_) {
    shard_ = std::make_shared<const std::vector<int64_t>>(
        epoch_shard(source_->size(), options_.seed, epoch, options_.shuffle, options_.rank, options_.ranks, shard_size_));
    shard_epoch_ = epoch;
  }
  return shard_;
}

namespace {

// A decoding thread's piece of a batch's work while the observer times it (loader_timing.h): opened by the
// thread's first timed sample of a batch, handed to the observer when the thread can get no more samples of
// that batch (all are dispatched), moves on to another batch, or waits.
class LoadedPieceBuilder {
 public:
  LoadedPieceBuilder(LoaderObserver* observer, int thread) : observer_(observer) { piece_.thread = thread; }
  bool timing() const { return observer_ != nullptr && observer_->active(); }
  void add(int64_t sequence, const DataPosition& batch, int64_t begin_ns, int64_t end_ns,
           const SampleStageTimes& stages) {
    if (open_ && sequence != sequence_) hand_over();
    if (!open_) {
      open_ = true;
      sequence_ = sequence;
      piece_.epoch = batch.epoch;
      piece_.index = batch.index;
      piece_.samples = 0;
      piece_.begin_ns = begin_ns;
      piece_.stages = SampleStageTimes{};
    }
    ++piece_.samples;
    piece_.end_ns = end_ns;
    for (int s = 0; s < sample_stages; ++s) piece_.stages.nanoseconds[s] += stages.nanoseconds[s];
  }
  void hand_over() {
    if (!open_) return;
    open_ = false;
    observer_->loaded(piece_);
  }

 private:
  LoaderObserver* observer_;
  LoadedPiece piece_;
  bool open_ = false;
  int64_t sequence_ = -1;
};

}  // namespace

void BatchLoader::SharedState::work(int worker) {
  SampleScratch scratch;
  const size_t image_floats = static_cast<size_t>(height_) * width_ * 3;
  LoadedPieceBuilder piece(options_.observer.get(), worker);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stop_) return;

    // The oldest batch that still has samples to hand out.
    BatchSlot* slot = nullptr;
    for (int64_t sequence = consumed_; sequence < planned_ && slot == nullptr; ++sequence) {
      BatchSlot& candidate = *slots_[static_cast<size_t>(sequence % options_.prefetch_batches)];
      if (candidate.sequence == sequence && candidate.state == BatchSlot::State::filling &&
          candidate.dispatched < candidate.batch.size) {
        slot = &candidate;
      }
    }
    if (slot != nullptr) {
      const int place = slot->dispatched++;
      const int64_t epoch = slot->batch.position.epoch;
      const int64_t sample = feed_ ? 0 : slot->batch.samples[static_cast<size_t>(place)];
      float* out = slot->batch.images.data() + static_cast<size_t>(place) * image_floats;
      int32_t* label = slot->batch.labels.data() + place;
      if (!feed_) loading_[static_cast<size_t>(worker)] = SampleInHand{sample, std::chrono::steady_clock::now()};
      const bool timed = piece.timing();
      lock.unlock();
      std::exception_ptr error;
      const int64_t skipped_before = scratch.corrupt_skipped;
      SampleStageTimes stages;
      scratch.stage_times = timed ? &stages : nullptr;
      const int64_t began = timed ? monotonic_ns() : 0;
      try {
        if (feed_) {
          decode_fed(*slot, place, scratch, out, label);
        } else {
          *label = source_->load(sample, options_.seed, epoch, out, scratch);
        }
      } catch (...) {
        error = std::current_exception();
      }
      const int64_t ended = timed ? monotonic_ns() : 0;
      lock.lock();
      if (!feed_) loading_[static_cast<size_t>(worker)].sample = -1;
      if (timed) {
        piece.add(slot->sequence, slot->batch.position, began, ended, stages);
        // Reported before the batch can be handed to the consumer, so its pieces are all in when it is.
        if (slot->dispatched == slot->batch.size) piece.hand_over();
      }
      slot->batch.corrupt_skipped += scratch.corrupt_skipped - skipped_before;
      if (error && place < slot->error_at) {
        slot->error = error;
        slot->error_at = place;
      }
      if (++slot->finished == slot->batch.size) consumer_wake_.notify_all();
      continue;
    }

    // Start the next batch when the queue has room (with a feed, the fetch thread does).
    if (!feed_ && !plan_done_ && planned_ < consumed_ + options_.prefetch_batches) {
      BatchSlot& next = *slots_[static_cast<size_t>(planned_ % options_.prefetch_batches)];
      if (next.state == BatchSlot::State::free && plan_next(next.batch)) {
        next.state = BatchSlot::State::preparing;
        next.sequence = planned_++;
        next.dispatched = 0;
        next.finished = 0;
        next.error = nullptr;
        next.error_at = INT_MAX;
        lock.unlock();
        std::exception_ptr error;
        try {
          // Outside the lock: the epoch's shard may take a while, and so may the first allocation.
          next.shard = shard_for(next.batch.position.epoch);
          Batch& batch = next.batch;
          batch.height = height_;
          batch.width = width_;
          batch.images.resize(static_cast<size_t>(batch.size) * image_floats);
          batch.labels.resize(static_cast<size_t>(batch.size));
          batch.samples.resize(static_cast<size_t>(batch.size));
          batch.repeats.resize(static_cast<size_t>(batch.size));
          batch.corrupt_skipped = 0;
          const int64_t real = std::min<int64_t>(batch.size, shard_size_ - batch.position.index);
          for (int i = 0; i < batch.size; ++i) {
            // Places past the share's end complete a too-small last batch with the share's first samples.
            const int64_t place = i < real ? batch.position.index + i : i - real;
            batch.samples[i] = (*next.shard)[static_cast<size_t>(place % shard_size_)];
            // Places past the data set's end in the epoch's dealt order are padding (sampler.h).
            batch.repeats[i] = i >= real || options_.rank + place * options_.ranks >= source_->size() ? 1 : 0;
          }
        } catch (...) {
          error = std::current_exception();
        }
        lock.lock();
        next.state = BatchSlot::State::filling;
        if (error) {  // nothing to decode: the batch is finished, failed
          next.error = error;
          next.error_at = -1;
          next.dispatched = next.finished = next.batch.size;
          consumer_wake_.notify_all();
        }
        workers_wake_.notify_all();
        continue;
      }
      if (plan_done_) consumer_wake_.notify_all();  // the consumer may be waiting for an end
    }
    piece.hand_over();
    workers_wake_.wait(lock);
  }
}

// Reads each batch's records from the feed, in order, into the oldest free slot, then hands the slot to the
// decoding threads. An epoch whose share ends exactly at a batch boundary yields no empty batch.
void BatchLoader::SharedState::fetch() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    workers_wake_.wait(lock, [&] {
      return stop_ ||
             (planned_ < consumed_ + options_.prefetch_batches &&
              slots_[static_cast<size_t>(planned_ % options_.prefetch_batches)]->state == BatchSlot::State::free);
    });
    if (stop_) return;
    if (options_.epochs > 0 && plan_position_.epoch >= options_.epochs) {
      plan_done_ = true;
      consumer_wake_.notify_all();
      return;
    }
    BatchSlot& slot = *slots_[static_cast<size_t>(planned_ % options_.prefetch_batches)];
    slot.state = BatchSlot::State::preparing;
    const DataPosition position = plan_position_;
    lock.unlock();

    std::exception_ptr error;
    int count = 0;
    bool share_done = false;
    try {
      if (slot.records.size() < static_cast<size_t>(options_.batch_size)) {
        slot.records.resize(static_cast<size_t>(options_.batch_size));
      }
      while (count < options_.batch_size) {
        if (!feed_->next(position.epoch, slot.records[static_cast<size_t>(count)])) {
          share_done = true;
          break;
        }
        ++count;
      }
    } catch (const FeedStopped&) {
      return;  // stop() was called: nobody waits for this slot
    } catch (...) {
      error = std::current_exception();
    }

    lock.lock();
    if (!error && count == 0) {  // the share ended at a batch boundary: on to the next epoch
      slot.state = BatchSlot::State::free;
      plan_position_ = DataPosition{position.epoch + 1, 0};
      continue;
    }
    Batch& batch = slot.batch;
    batch.position = position;
    batch.size = error ? 1 : count;
    batch.next = share_done ? DataPosition{position.epoch + 1, 0} : DataPosition{position.epoch, position.index + count};
    plan_position_ = batch.next;
    batch.height = height_;
    batch.width = width_;
    batch.corrupt_skipped = 0;
    slot.sequence = planned_++;
    slot.state = BatchSlot::State::filling;
    slot.dispatched = slot.finished = 0;
    slot.error = nullptr;
    slot.error_at = INT_MAX;
    if (error) {  // nothing to decode: the batch is finished, failed
      slot.error = error;
      slot.error_at = -1;
      slot.dispatched = slot.finished = batch.size;
      consumer_wake_.notify_all();
    } else {
      const size_t image_floats = static_cast<size_t>(height_) * width_ * 3;
      batch.images.resize(static_cast<size_t>(count) * image_floats);
      batch.labels.resize(static_cast<size_t>(count));
      batch.samples.resize(static_cast<size_t>(count));
      batch.repeats.resize(static_cast<size_t>(count));
      for (int i = 0; i < count; ++i) {
        batch.samples[static_cast<size_t>(i)] = slot.records[static_cast<size_t>(i)].index;
        batch.repeats[static_cast<size_t>(i)] = slot.records[static_cast<size_t>(i)].repeat ? 1 : 0;
      }
    }
    workers_wake_.notify_all();
  }
}

// Decodes record `place` of a fed batch. With skip_corrupt an undecodable image is replaced by the next
// record of the batch that decodes (round the batch), counted in the batch; the replacement is augmented
// as the record it replaces would have been, so the result still depends only on the stream and the seed.
void BatchLoader::SharedState::decode_fed(BatchSlot& slot, int place, SampleScratch& scratch, float* out,
                                          int32_t* label) {
  const int size = slot.batch.size;
  const int64_t epoch = slot.batch.position.epoch;
  const FedRecord& own = slot.records[static_cast<size_t>(place)];
  for (int attempt = 0; attempt < size; ++attempt) {
    const FedRecord& record = slot.records[static_cast<size_t>((place + attempt) % size)];
    Rng rng(sample_key(options_.seed, epoch, own.index));
    try {
      decode_augment_normalise(record.image.data(), record.image.size(),
                               fmt::format("{}, record {} of epoch {}", feed_->describe(), record.index, epoch),
                               fed_image_, rng, scratch, out);
      *label = record.label;
      return;
    } catch (const DataError&) {
      if (!options_.skip_corrupt) throw;
      ++scratch.corrupt_skipped;
    }
  }
  throw DataError(fmt::format("{}: no image of the {} in the batch at record {} of epoch {} could be decoded",
                              feed_->describe(), size, own.index, epoch));
}

BatchLoader::Status BatchLoader::SharedState::next(Batch& batch, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (failure_) std::rethrow_exception(failure_);
  BatchSlot& slot = *slots_[static_cast<size_t>(consumed_ % options_.prefetch_batches)];
  auto ready = [&] {
    return slot.sequence == consumed_ && slot.state == BatchSlot::State::filling && slot.finished == slot.batch.size;
  };
  auto ended = [&] {
    return plan_done_ && consumed_ == planned_;
  };
  // The end may not be planned yet when the workers are idle at the last epoch's boundary.
  if (!feed_ && !plan_done_ && consumed_ == planned_ && options_.epochs > 0 && plan_position_.epoch >= options_.epochs) {
    plan_done_ = true;
  }
  if (!consumer_wake_.wait_for(lock, timeout, [&] { return stop_ || ready() || ended(); })) {
    return Status::timed_out;
  }
  if (stop_) return Status::stopped;
  if (ready()) {
    if (slot.error) {
      failure_ = slot.error;
      stop_ = true;
      lock.unlock();
      workers_wake_.notify_all();
      std::rethrow_exception(failure_);
    }
    std::swap(batch, slot.batch);
    slot.shard.reset();
    slot.state = BatchSlot::State::free;
    ++consumed_;
    consumer_position_ = batch.next;
    lock.unlock();
    workers_wake_.notify_all();
    return Status::batch;
  }
  return Status::end;
}

}  // namespace train::data
