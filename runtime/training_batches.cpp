#include "runtime/training_batches.h"

#include "common/log.h"
#include "common/monotonic_clock.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/data/data_error.h"

#include <fmt/format.h>

namespace train {

std::chrono::seconds batch_wait_limit(const TrainingSettings& settings, std::chrono::seconds data_timeout) {
  return data_timeout + std::chrono::seconds(settings.pipe ? 60 : 0);
}

bool wait_for_batch(data::BatchLoader& loader, data::Batch& batch, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    auto status = loader.next(batch, std::chrono::milliseconds(500));
    if (status == data::BatchLoader::Status::batch) return true;
    if (status == data::BatchLoader::Status::end || status == data::BatchLoader::Status::stopped) return false;
    if (std::chrono::steady_clock::now() > deadline) {
      // A read that never returns (a stalled network file system, a FIFO in an image's place) is named.
      const auto stalled = loader.stalled_samples(std::chrono::duration_cast<std::chrono::milliseconds>(limit) / 2);
      throw data::DataTimeout(fmt::format("no training batch arrived within {} s (set TRAIN_DATA_TIMEOUT_SECONDS to "
                                          "wait longer): the data is unreadable or too slow{}",
                                          limit.count(),
                                          stalled.empty() ? std::string()
                                                          : fmt::format("; still reading {}", fmt::join(stalled, "; "))));
    }
  }
}

namespace {

// The loader's next training batch, its wait told to the observers.
class ObservedLoader {
 public:
  ObservedLoader(data::BatchLoader& loader, std::chrono::seconds limit, const std::vector<TrainingObserver*>& observers)
      : loader_(loader), limit_(limit), observers_(observers) {}

  bool next(data::Batch& batch) {
    const int64_t waited_from = monotonic_ns();
    const bool got = wait_for_batch(loader_, batch, limit_);
    const int64_t arrived = monotonic_ns();
    for (TrainingObserver* observer : observers_) observer->batch_arrived(got ? &batch : nullptr, waited_from, arrived);
    return got;
  }

 private:
  data::BatchLoader& loader_;
  std::chrono::seconds limit_;
  std::vector<TrainingObserver*> observers_;  // a copy: the list is fixed before training starts
};

// File and FastFile mode: every rank's share of an epoch has the same number of batches, so each rank
// knows from its own batches where an epoch ends. Training ends after `total_steps` or with the data.
class FileModeBatches final : public TrainingBatches {
 public:
  FileModeBatches(ObservedLoader loader, int64_t epoch, int64_t steps_per_epoch, int64_t total_steps)
      : loader_(loader), epoch_(epoch), steps_per_epoch_(steps_per_epoch), total_steps_(total_steps) {}

  NextStep next(int64_t steps_done) override {
    if (!holding_) {
      if (steps_done >= total_steps_ || !loader_.next(batch_)) {
        // The last epoch ends with the last step (or with max_steps, perhaps part-way).
        return NextStep{true, steps_done % steps_per_epoch_ == 0, true, epoch_};
      }
      holding_ = true;
    }
    if (batch_.position.epoch != epoch_) {  // the batch opens the next epoch: this one ends first
      const NextStep end{true, true, false, epoch_};
      epoch_ = batch_.position.epoch;
      return end;
    }
    holding_ = false;
    NextStep step;
    step.epoch = epoch_;
    step.batch = &batch_;
    step.after = batch_.next;
    return step;
  }

 private:
  ObservedLoader loader_;
  int64_t epoch_, steps_per_epoch_, total_steps_;
  data::Batch batch_;
  bool holding_ = false;  // batch_ is read but not yet trained
};

// Pipe mode. A rank's share of an epoch is known to be over only when its stream says so, and with
// ShardedByS3Key hosts' streams may differ in length; so before each step the ranks vote: the epoch goes
// on while any rank still has a batch of it, and a rank whose share is done trains its first batch of the
// epoch again meanwhile (its gradient still counts, as DistributedSampler's padding does). The epoch ends
// when no rank has a batch of it left; training ends after the last epoch or at max_steps.
class PipeModeBatches final : public TrainingBatches {
 public:
  PipeModeBatches(ObservedLoader loader, const TrainingSettings& settings, const RankIdentity& identity, MPI_Comm comm,
                  std::chrono::milliseconds collective_timeout, const data::DataPosition& resume_position,
                  int64_t steps_per_epoch)
      : loader_(loader),
        settings_(settings),
        identity_(identity),
        comm_(comm),
        collective_timeout_(collective_timeout),
        steps_per_epoch_(steps_per_epoch),
        epoch_(resume_position.epoch),
        steps_in_epoch_(resume_position.index / settings.batch_per_rank) {
    if (identity_.rank == 0 && settings_.shuffle) {
      log_info("note: Pipe mode trains on the records in the order the channel streams them; the shuffle "
               "hyperparameter applies to File and FastFile mode (shuffle a Pipe-mode channel with its ShuffleConfig)");
    }
  }

  NextStep next(int64_t steps_done) override {
    if (settings_.max_steps > 0 && steps_done >= settings_.max_steps) return NextStep{true, false, true, epoch_};
    if (!have_pending_) have_pending_ = loader_.next(pending_);
    const bool in_epoch = have_pending_ && pending_.position.epoch == epoch_;
    if (!epoch_goes_on(in_epoch)) return end_epoch();
    NextStep step;
    step.epoch = epoch_;
    step.batch = &pending_;
    step.padding = !in_epoch;
    if (in_epoch) {
      if (!have_first_) {
        first_ = pending_;
        have_first_ = true;
      }
      have_pending_ = false;
    } else if (have_first_) {
      step.batch = &first_;
    } else {
      throw data::DataError(fmt::format(
          "Pipe-mode channel {}: rank {} received no records in epoch {} while other ranks did: with ShardedByS3Key "
          "every host needs at least one batch per rank ({} records per host here); spread the objects more evenly "
          "over the hosts or use FullyReplicated",
          settings_.pipe_channel, identity_.rank, epoch_, int64_t{settings_.batch_per_rank} * identity_.local_size));
    }
    ++steps_in_epoch_;
    // Every rank is at the same step of the epoch; a resumed job skips that many batches of each share.
    step.after = data::DataPosition{epoch_, steps_in_epoch_ * settings_.batch_per_rank};
    return step;
  }

 private:
  // The vote before each step (collective): the epoch goes on while any rank still has a batch of it.
  bool epoch_goes_on(bool in_epoch) {
    int64_t ranks_with_data = in_epoch ? 1 : 0;
    comm::bounded_allreduce(&ranks_with_data, 1, MPI_INT64_T, MPI_SUM, comm_, collective_timeout_,
                            "the vote on the end of a Pipe-mode epoch");
    return ranks_with_data > 0;
  }

  NextStep end_epoch() {
    if (identity_.rank == 0 && steps_in_epoch_ != steps_per_epoch_) {
      log_info("note: Pipe-mode epoch {} took {} steps, but num_training_samples={} implies {}; the learning-rate "
               "schedule assumes {}: set num_training_samples to the number of records the channel streams",
               epoch_, steps_in_epoch_, *settings_.num_training_samples, steps_per_epoch_, steps_per_epoch_);
    }
    const NextStep end{true, true, epoch_ + 1 >= settings_.epochs, epoch_};
    ++epoch_;
    steps_in_epoch_ = 0;
    have_first_ = false;
    return end;
  }

  ObservedLoader loader_;
  const TrainingSettings& settings_;
  RankIdentity identity_;
  MPI_Comm comm_;
  std::chrono::milliseconds collective_timeout_;
  int64_t steps_per_epoch_, epoch_, steps_in_epoch_;
  data::Batch pending_, first_;
  bool have_pending_ = false, have_first_ = false;
};

}  // namespace

std::unique_ptr<TrainingBatches> make_training_batches(const TrainingSettings& settings, const RankIdentity& identity,
                                                       MPI_Comm comm, std::chrono::milliseconds collective_timeout,
                                                       std::chrono::seconds data_timeout, data::BatchLoader& loader,
                                                       const data::DataPosition& resume_position,
                                                       int64_t steps_per_epoch, int64_t total_steps,
                                                       const std::vector<TrainingObserver*>& observers) {
  const ObservedLoader observed(loader, batch_wait_limit(settings, data_timeout), observers);
  if (settings.pipe) {
    return std::make_unique<PipeModeBatches>(observed, settings, identity, comm, collective_timeout, resume_position,
                                             steps_per_epoch);
  }
  return std::make_unique<FileModeBatches>(observed, resume_position.epoch, steps_per_epoch, total_steps);
}

}  // namespace train
