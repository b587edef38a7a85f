// Which batch each training step takes, and where the epochs end: File and FastFile mode read this rank's
// share in order; Pipe mode votes before each step whether the epoch goes on (runtime/training_batches.cpp).
// The loop (runtime/trainer.cpp) asks for the next step and does what it says.
#pragma once

#include "job/rank_environment.h"
#include "runtime/data/loader/batch_loader.h"
#include "runtime/training_observer.h"
#include "runtime/training_settings.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace train {

// What the loop does next: end an epoch (then perhaps end training), or train `batch`.
struct NextStep {
  bool ends_epoch = false;     // `epoch` ends before anything else (complete: false when training ends part-way)
  bool complete = true;
  bool ends_training = false;  // after that epoch's end, training is over
  int64_t epoch = 0;
  const data::Batch* batch = nullptr;  // the step's batch, when neither ends
  bool padding = false;                // Pipe mode: a rank whose share is done trains its epoch's first batch again
  data::DataPosition after;            // where a restart after this step resumes
};

class TrainingBatches {
 public:
  virtual ~TrainingBatches() = default;
  // Collective in Pipe mode (the vote). `steps_done`: the job's steps so far.
  virtual NextStep next(int64_t steps_done) = 0;
};

// How long to wait for one batch: the data timeout, and in Pipe mode a minute more, so that the host's
// reader (which bounds its own waits by the data timeout) sends its more precise reason first.
std::chrono::seconds batch_wait_limit(const TrainingSettings& settings, std::chrono::seconds data_timeout);

// The next batch from `loader`, waiting in bounded slices up to `limit`; false at the end of the data.
// Throws data::DataTimeout naming what is still being read when none arrives in time.
bool wait_for_batch(data::BatchLoader& loader, data::Batch& batch, std::chrono::seconds limit);

// The job's batch order for its mode. `observers` are told of every wait for a batch (batch_arrived).
std::unique_ptr<TrainingBatches> make_training_batches(const TrainingSettings& settings, const RankIdentity& identity,
                                                       MPI_Comm comm, std::chrono::milliseconds collective_timeout,
                                                       std::chrono::seconds data_timeout, data::BatchLoader& loader,
                                                       const data::DataPosition& resume_position,
                                                       int64_t steps_per_epoch, int64_t total_steps,
                                                       const std::vector<TrainingObserver*>& observers);

}  // namespace train
