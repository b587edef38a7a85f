// The training loop of a rank, one for every backend: it asks for each step's batch (runtime/training_batches.h),
// has the Engine (runtime/engine/engine.h) train it, votes on stopping, and tells its observers at named
// points (runtime/training_observer.h): the report, the validation pass, the saved state, the timeline and
// the sample log do everything else. Every rank runs it; rank 0 logs and writes. Read Trainer::train first.
#pragma once

#include "job/job_description.h"
#include "job/rank_environment.h"
#include "runtime/engine/engine.h"
#include "runtime/learning_rate.h"
#include "runtime/saved_state.h"
#include "runtime/training_batches.h"
#include "runtime/training_clock.h"
#include "runtime/training_data.h"
#include "runtime/training_observer.h"
#include "runtime/training_settings.h"

#include <mpi.h>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

namespace train {

class Trainer {
 public:
  Trainer(const JobDescription& job, const RankIdentity& identity, MPI_Comm comm);
  ~Trainer();

  // Returns the rank's exit code: 0 when training finished or stopped on request (after its checkpoint); 128 +
  // the signal when this rank's stop was one the job did not ask for (runtime/stop_request.h).
  // Throws ConfigError for a job it cannot train, DataError for bad data, MpiError for a broken job.
  int run();

 private:
  int train(TrainingBatches& batches);
  bool train_one_step(const data::Batch& batch, bool padding);
  bool vote_to_stop();
  bool log_line_due(bool stopping) const;
  void end_epoch(int64_t epoch, bool complete);
  int end_training(std::optional<CheckpointAt> checkpoint);
  void announce() const;
  std::chrono::milliseconds collective_timeout() const;

  // Tells every observer, in their order, at one named point.
  template <typename... Parameters, typename... Arguments>
  void notify(void (TrainingObserver::*point)(Parameters...), Arguments&&... arguments) {
    for (TrainingObserver* observer : observers_) (observer->*point)(arguments...);
  }

  TrainingSettings settings_;
  RankIdentity identity_;
  MPI_Comm comm_;
  std::chrono::seconds step_timeout_{900}, data_timeout_{600};
  std::unique_ptr<TrainingData> data_;
  std::unique_ptr<Engine> engine_;
  LearningRateSchedule schedule_;
  TrainingClock clock_;
  int64_t step_ = 0, steps_per_epoch_ = 1, total_steps_ = 0;
  // The observers, owned here, and the order they are told in (Trainer::run).
  std::vector<std::unique_ptr<TrainingObserver>> owned_observers_;
  std::vector<TrainingObserver*> observers_;
};

}  // namespace train
