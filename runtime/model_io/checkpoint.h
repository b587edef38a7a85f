// Checkpoints in /opt/ml/checkpoints (SageMaker syncs that directory with S3, and a spot job that is
// restarted finds the last one there). One file, `checkpoint.safetensors`:
//
//   the model's tensors                 with the names and layout the caller gives (the model file's,
//                                       torchvision's, so the checkpoint also loads in PyTorch with
//                                       strict=False)
//   "optimizer.momentum.<param name>"   the optimizer's momentum buffer of each parameter
//   __metadata__                        {"format": "train checkpoint", "format_version": "1",
//                                        "state": JSON of CheckpointState}
//
// It is written atomically over the previous one: until the new file is complete, the last good
// checkpoint stays in place under its name, and a write that dies leaves at most a temporary file (which
// the next write removes and the reader never looks at).
#pragma once

#include "runtime/model_io/safetensors.h"
#include "runtime/model_io/tensor.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train::model_io {

constexpr std::string_view checkpoint_file_name = "checkpoint.safetensors";
constexpr std::string_view momentum_prefix = "optimizer.momentum.";

struct CheckpointState {
  int64_t step = 0;           // optimizer steps completed by the whole job
  int64_t epoch = 0;          // the epoch to continue, 0-based
  int64_t step_in_epoch = 0;  // batches of `epoch` already trained (0 at an epoch boundary)
  int world_size = 0;         // ranks of the job that wrote it (the data position depends on it)
  std::string rng_state;      // the training loop's random generators, serialised as text (UTF-8)
  // The hyperparameters a resuming job must share (num_layers, num_classes, image_shape, seed, ...): a
  // checkpoint of another job is refused rather than silently continued.
  nlohmann::json identity = nlohmann::json::object();
  std::string version;  // train's version that wrote it

  std::string fingerprint() const;  // identity_fingerprint(identity)
};

struct Checkpoint {
  CheckpointState state;
  std::vector<Tensor> model;     // in the order written
  std::vector<Tensor> momentum;  // names without the prefix: the parameter's name
};

// "fnv1a64:0123456789abcdef" over the canonical (key-sorted, compact) JSON text.
std::string identity_fingerprint(const nlohmann::json& identity);

std::filesystem::path checkpoint_path(const std::filesystem::path& directory);

// Writes `directory`/checkpoint.safetensors atomically, creating the directory if needed, after removing
// temporary files that an interrupted earlier write left. Momentum tensors are named by their parameter.
// Throws std::invalid_argument for a model tensor whose name starts with "optimizer.", a momentum tensor
// for no model tensor or of another shape, or rng_state that is not UTF-8; std::runtime_error for I/O.
void write_checkpoint(const std::filesystem::path& directory, const CheckpointState& state,
                      const std::vector<TensorView>& model, const std::vector<TensorView>& momentum);

// The checkpoint in `directory`, or nullopt when there is none. Throws SafetensorsError (naming the
// file) when there is one that is not a valid checkpoint: a damaged checkpoint is reported, not skipped.
std::optional<Checkpoint> read_checkpoint(const std::filesystem::path& directory);

// The checkpoint file's bytes, or nullopt when there is none: in a multi-host job only the master host
// has it, so rank 0 reads it and sends it to every rank, which parses it with parse_checkpoint.
std::optional<std::string> read_checkpoint_file(const std::filesystem::path& directory);
Checkpoint parse_checkpoint(std::string_view bytes, std::string_view source);

// Why this job must not resume from a checkpoint with state `found`, or nullopt when it may: the
// hyperparameters in `identity` must equal the checkpoint's. The message names each one that differs.
std::optional<std::string> resume_refusal(const CheckpointState& found, const nlohmann::json& identity,
                                          std::string_view source);

}  // namespace train::model_io
