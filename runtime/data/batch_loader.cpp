#include "runtime/data/batch_loader.h"

#include "runtime/data/data_error.h"
#include "runtime/data/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <utility>

namespace train::data {

struct BatchLoader::Slot {
  enum class State { free, preparing, filling };
  State state = State::free;
  int64_t sequence = -1;
  Batch batch;
  std::shared_ptr<const std::vector<int64_t>> shard;
  int dispatched = 0;  // samples handed to a thread
  int finished = 0;    // samples done (successfully or not)
  std::exception_ptr error;
  int error_at = INT_MAX;  // the failed sample's place in the batch: the first one is reported
};

BatchLoader::BatchLoader(std::shared_ptr<const SampleSource> source, const LoaderOptions& options)
    : source_(std::move(source)), options_(options) {
  if (!source_) throw std::invalid_argument("data loader: no sample source");
  if (options_.batch_size < 1) {
    throw std::invalid_argument(fmt::format("data loader: batch size must be at least 1, got {}", options_.batch_size));
  }
  if (options_.threads < 1 || options_.threads > 256) {
    throw std::invalid_argument(fmt::format("data loader: threads must be 1 to 256, got {}", options_.threads));
  }
  if (options_.prefetch_batches < 1) {
    throw std::invalid_argument(
        fmt::format("data loader: prefetch_batches must be at least 1, got {}", options_.prefetch_batches));
  }
  if (options_.ranks < 1 || options_.rank < 0 || options_.rank >= options_.ranks) {
    throw std::invalid_argument(fmt::format("data loader: rank {} is not in [0, {})", options_.rank, options_.ranks));
  }
  if (options_.start.epoch < 0 || options_.start.index < 0 || options_.epochs < 0) {
    throw std::invalid_argument(fmt::format("data loader: start position (epoch {}, index {}) or epochs {} is negative",
                                            options_.start.epoch, options_.start.index, options_.epochs));
  }
  if (source_->size() < 1) throw DataError("data loader: the data set is empty");
  shard_size_ = data::shard_size(source_->size(), options_.ranks);
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
  for (int i = 0; i < options_.prefetch_batches; ++i) slots_.push_back(std::make_unique<Slot>());
  threads_.reserve(static_cast<size_t>(options_.threads));
  try {
    for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { work(); });
  } catch (...) {
    stop();
    for (auto& thread : threads_) thread.join();
    throw;
  }
}

BatchLoader::~BatchLoader() {
  stop();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void BatchLoader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  workers_wake_.notify_all();
  consumer_wake_.notify_all();
}

int64_t BatchLoader::batches_per_epoch() const {
  const int64_t b = options_.batch_size;
  return options_.drop_last ? shard_size_ / b : (shard_size_ + b - 1) / b;
}

DataPosition BatchLoader::position() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return consumer_position_;
}

// Moves a position that has no batch left in its epoch to the start of the next epoch.
DataPosition BatchLoader::normalise(DataPosition position) const {
  const int64_t left = shard_size_ - position.index;
  if (left <= 0 || (options_.drop_last && left < options_.batch_size)) return DataPosition{position.epoch + 1, 0};
  return position;
}

bool BatchLoader::plan_next(Batch& batch) {
  if (plan_done_) return false;
  if (options_.epochs > 0 && plan_position_.epoch >= options_.epochs) {
    plan_done_ = true;
    return false;
  }
  batch.position = plan_position_;
  batch.size = static_cast<int>(std::min<int64_t>(options_.batch_size, shard_size_ - plan_position_.index));
  batch.next = normalise(DataPosition{plan_position_.epoch, plan_position_.index + batch.size});
  plan_position_ = batch.next;
  return true;
}

std::shared_ptr<const std::vector<int64_t>> BatchLoader::shard_for(int64_t epoch) {
  std::lock_guard<std::mutex> lock(shard_mutex_);
  if (shard_epoch_ != epoch || !shard_) {
    shard_ = std::make_shared<const std::vector<int64_t>>(
        epoch_shard(source_->size(), options_.seed, epoch, options_.shuffle, options_.rank, options_.ranks));
    shard_epoch_ = epoch;
  }
  return shard_;
}

void BatchLoader::work() {
  SampleScratch scratch;
  const size_t image_floats = static_cast<size_t>(source_->height()) * source_->width() * 3;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stop_) return;

    // The oldest batch that still has samples to hand out.
    Slot* slot = nullptr;
    for (int64_t sequence = consumed_; sequence < planned_ && slot == nullptr; ++sequence) {
      Slot& candidate = *slots_[static_cast<size_t>(sequence % options_.prefetch_batches)];
      if (candidate.sequence == sequence && candidate.state == Slot::State::filling &&
          candidate.dispatched < candidate.batch.size) {
        slot = &candidate;
      }
    }
    if (slot != nullptr) {
      const int place = slot->dispatched++;
      const int64_t position = slot->batch.position.index + place;
      const int64_t epoch = slot->batch.position.epoch;
      const int64_t sample = (*slot->shard)[static_cast<size_t>(position)];
      float* out = slot->batch.images.data() + static_cast<size_t>(place) * image_floats;
      int32_t* label = slot->batch.labels.data() + place;
      lock.unlock();
      std::exception_ptr error;
      const int64_t skipped_before = scratch.corrupt_skipped;
      try {
        *label = source_->load(sample, options_.seed, epoch, out, scratch);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      slot->batch.corrupt_skipped += scratch.corrupt_skipped - skipped_before;
      if (error && place < slot->error_at) {
        slot->error = error;
        slot->error_at = place;
      }
      if (++slot->finished == slot->batch.size) consumer_wake_.notify_all();
      continue;
    }

    // Start the next batch when the queue has room.
    if (!plan_done_ && planned_ < consumed_ + options_.prefetch_batches) {
      Slot& next = *slots_[static_cast<size_t>(planned_ % options_.prefetch_batches)];
      if (next.state == Slot::State::free && plan_next(next.batch)) {
        next.state = Slot::State::preparing;
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
          batch.height = source_->height();
          batch.width = source_->width();
          batch.images.resize(static_cast<size_t>(batch.size) * image_floats);
          batch.labels.resize(static_cast<size_t>(batch.size));
          batch.samples.resize(static_cast<size_t>(batch.size));
          batch.corrupt_skipped = 0;
          for (int i = 0; i < batch.size; ++i) {
            batch.samples[i] = (*next.shard)[static_cast<size_t>(batch.position.index + i)];
          }
        } catch (...) {
          error = std::current_exception();
        }
        lock.lock();
        next.state = Slot::State::filling;
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
    workers_wake_.wait(lock);
  }
}

BatchLoader::Status BatchLoader::next(Batch& batch, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (failure_) std::rethrow_exception(failure_);
  Slot& slot = *slots_[static_cast<size_t>(consumed_ % options_.prefetch_batches)];
  auto ready = [&] {
    return slot.sequence == consumed_ && slot.state == Slot::State::filling && slot.finished == slot.batch.size;
  };
  auto ended = [&] {
    return plan_done_ && consumed_ == planned_;
  };
  // The end may not be planned yet when the workers are idle at the last epoch's boundary.
  if (!plan_done_ && consumed_ == planned_ && options_.epochs > 0 && plan_position_.epoch >= options_.epochs) {
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
    slot.state = Slot::State::free;
    ++consumed_;
    consumer_position_ = batch.next;
    lock.unlock();
    workers_wake_.notify_all();
    return Status::batch;
  }
  return Status::end;
}

}  // namespace train::data
