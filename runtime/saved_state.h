// What a job saves and restores, an observer of the loop (runtime/training_observer.h): the weights it starts
// from (a `model` channel), the checkpoint it resumes from and writes (model, momentum, step and data
// position) at epoch ends and on a stop, and the model file at the end, after every rank is checked to hold
// the same parameters. Rank 0 reads and writes the files; every rank holds the same state.
#pragma once

#include "runtime/training_context.h"
#include "runtime/training_observer.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>

namespace train {

// Where a resumed job goes on: after `step` steps, its data at `position`.
struct ResumePoint {
  int64_t step = 0;
  data::DataPosition position;
};

class SavedState final : public TrainingObserver {
 public:
  explicit SavedState(const TrainingContext& context) : context_(context) {}

  // Before training (collective): the `model` channel's weights into the engine, when the job has one.
  // Throws ConfigError for weights that cannot be used.
  void load_initial_weights();
  // Before training (collective): the newest usable checkpoint into the engine; nullopt without one.
  // Throws ConfigError for a checkpoint of another job or another number of ranks.
  std::optional<ResumePoint> resume_if_checkpointed();

  void save_checkpoint(const CheckpointAt& at) override;
  // A stop's checkpoint, or the model once every rank is found to hold the same parameters.
  void save_result(const TrainingEnd& end) override;

 private:
  void write_model(int64_t step);
  nlohmann::json checkpoint_identity() const;

  TrainingContext context_;
};

}  // namespace train
