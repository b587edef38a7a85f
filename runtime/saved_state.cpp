#include "runtime/saved_state.h"

#include "common/config_error.h"
#include "common/log.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/comm/broadcast_text.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/comm/replica_check.h"
#include "runtime/model/model_state.h"
#include "runtime/model_io/checkpoint.h"
#include "runtime/model_io/initial_weights.h"
#include "runtime/model_io/model_files.h"
#include "runtime/model_io/safetensors.h"

#include <fmt/format.h>

#include <algorithm>

#ifndef TRAIN_VERSION
#define TRAIN_VERSION "unknown"
#endif

namespace train {

namespace {

// Rank 0's choice of checkpoint, sent to every rank: on several hosts only the master's checkpoint directory
// holds the files (rank 0 writes them there), and all ranks must resume from the same one. A damaged newest
// checkpoint is reported and the previous one taken; when none is usable every rank fails with the reason.
std::optional<model_io::Checkpoint> shared_checkpoint(const std::filesystem::path& directory, int rank, MPI_Comm comm) {
  enum : int64_t { none, found, none_usable };
  int64_t outcome = none;
  std::string text;    // the checkpoint's bytes, or why none can be used
  std::string source;  // the checkpoint's file
  std::optional<model_io::Checkpoint> checkpoint;  // rank 0's, parsed as it chose it
  if (rank == 0) {
    model_io::CheckpointChoice choice = model_io::choose_checkpoint(directory);
    for (const auto& problem : choice.rejected) log_error("damaged checkpoint: {}", problem);
    if (choice.bytes) {
      if (!choice.rejected.empty()) {
        const auto aside = model_io::set_aside_damaged_checkpoint(directory);
        log_info("resuming from the previous checkpoint {} instead; the damaged one is kept as {}",
                 choice.path.string(), aside.string());
      }
      outcome = found;
      text = std::move(*choice.bytes);
      source = choice.path.string();
      checkpoint = std::move(choice.checkpoint);
    } else if (choice.found_any()) {
      outcome = none_usable;
      text = model_io::no_usable_checkpoint_message(directory, choice.rejected);
    }
  }
  MPI_CHECK(MPI_Bcast(&outcome, 1, MPI_INT64_T, 0, comm));
  if (outcome == none) return std::nullopt;
  comm::broadcast_text(text, comm);
  if (outcome == none_usable) throw ConfigError(text);
  comm::broadcast_text(source, comm);
  if (rank == 0) return checkpoint;
  return model_io::parse_checkpoint(text, source);
}

}  // namespace

void SavedState::load_initial_weights() {
  const auto path = *context_.settings.weights_dir / std::string(model_io::model_weights_file_name);
  model_io::InitialWeights selected;
  try {
    auto file = model_io::read_safetensors(path.string());
    selected = model_io::select_initial_weights(file, path.string(),
                                                model::expected_tensors(context_.engine.plan().spec),
                                                fmt::format("resnet{}", context_.settings.depth));
  } catch (const model_io::SafetensorsError& error) {
    // The user's input, not train's fault: a damaged or foreign file in the `model` channel.
    throw ConfigError(fmt::format("the `model` channel's weights cannot be used: {}; give the channel an intact "
                                  "model.safetensors (a model file train wrote, or a torchvision state dict)",
                                  error.what()));
  }
  context_.engine.import_model(selected.tensors);
  if (context_.identity.rank == 0) {
    log_info("started from the weights in {}", path.string());
    for (const auto& note : selected.notes) log_info("{}", note);
  }
}

nlohmann::json SavedState::checkpoint_identity() const {
  return {{"num_layers", context_.settings.depth},
          {"num_classes", context_.data.classes()},
          {"image_shape", {3, context_.settings.height, context_.settings.width}},
          {"seed", context_.settings.seed},
          {"batch_per_rank", context_.settings.batch_per_rank},
          {"shuffle", context_.settings.shuffle},
          {"data_ranks", context_.settings.data_ranks}};
}

std::optional<ResumePoint> SavedState::resume_if_checkpointed() {
  auto checkpoint = shared_checkpoint(context_.settings.checkpoint_dir, context_.identity.rank, context_.comm);
  if (!checkpoint) return std::nullopt;
  const std::string& source = checkpoint->source;
  if (auto refusal = model_io::resume_refusal(checkpoint->state, checkpoint_identity(), source)) {
    throw ConfigError(*refusal);
  }
  if (checkpoint->state.world_size != context_.identity.size) {
    throw ConfigError(fmt::format("{} was written by a job of {} ranks and this job has {}; its data position "
                                  "cannot carry over: remove it to start afresh, or run with {} ranks",
                                  source, checkpoint->state.world_size, context_.identity.size,
                                  checkpoint->state.world_size));
  }
  context_.engine.import_model(checkpoint->model);
  context_.engine.import_momentum(checkpoint->momentum);  // none before the first step
  const ResumePoint resume{checkpoint->state.step,
                           data::DataPosition{checkpoint->state.epoch,
                                              checkpoint->state.step_in_epoch * context_.settings.batch_per_rank}};
  if (context_.identity.rank == 0) {
    log_info("resuming from {}: step {}, epoch {}, batch {} of that epoch", source, resume.step,
             checkpoint->state.epoch, checkpoint->state.step_in_epoch);
  }
  return resume;
}

void SavedState::save_checkpoint(const CheckpointAt& at) {
  const data::DataPosition& next = at.next;
  if (context_.identity.rank == 0) {  // every rank holds the same state
    model_io::CheckpointState state;
    state.step = at.step;
    state.epoch = next.epoch;
    state.step_in_epoch = next.index / context_.settings.batch_per_rank;
    state.world_size = context_.identity.size;
    state.rng_state =
        fmt::format("seed={} (all randomness derives from the seed and the data position)", context_.settings.seed);
    state.identity = checkpoint_identity();
    state.version = TRAIN_VERSION;
    const model::ExportedTensors model = context_.engine.export_model();
    const model::ExportedTensors momentum = context_.engine.export_momentum();
    model_io::write_checkpoint(context_.settings.checkpoint_dir, state, model.views(), momentum.views());
    log_info("checkpoint written at step {} ({}): {}", at.step, at.why,
             model_io::checkpoint_path(context_.settings.checkpoint_dir).string());
  }
  comm::bounded_barrier(context_.comm, context_.collective_timeout, "the barrier after writing a checkpoint");
}

void SavedState::save_result(const TrainingEnd& end) {
  if (end.stopped()) {
    save_checkpoint(*end.checkpoint);
    return;
  }
  const std::vector<float> parameters = context_.engine.parameters();
  comm::check_replicas_agree(parameters.data(), parameters.size(), context_.identity, context_.comm,
                             context_.collective_timeout);
  write_model(end.step);
}

void SavedState::write_model(int64_t step) {
  if (context_.identity.rank == 0) {
    model_io::ModelDescription description;
    description.num_layers = context_.settings.depth;
    description.num_classes = context_.data.classes();
    const auto& names = context_.data.class_names();
    const bool named = names.size() == static_cast<size_t>(context_.data.classes());
    description.classes = named ? names : std::vector<std::string>{};
    description.input_shape = {3, context_.settings.height, context_.settings.width};
    description.version = TRAIN_VERSION;
    const model::ExportedTensors tensors = context_.engine.export_model();
    model_io::write_model_files(context_.settings.model_dir, tensors.views(), description);
    log_info("model written to {} after {} steps", context_.settings.model_dir.string(), step);
  }
  comm::bounded_barrier(context_.comm, context_.collective_timeout, "the barrier after writing the model");
}

}  // namespace train
