// Checkpoints in /opt/ml/checkpoints (SageMaker syncs that directory with S3, and a spot job that is
// restarted finds the last one there). The newest is `checkpoint.safetensors`, the one before it
// `checkpoint.previous.safetensors`; each is:
//
//   the model's tensors                 with the names and layout the caller gives (the model file's,
//                                       torchvision's, so the checkpoint also loads in PyTorch with
//                                       strict=False)
//   "optimizer.momentum.<param name>"   the optimizer's momentum buffer of each parameter
//   __metadata__                        {"format": "train checkpoint", "format_version": "2",
//                                        "state": JSON of CheckpointState,
//                                        "tensor_crc32": every tensor's checksum (tensor_checksums.h)}
//
// A new checkpoint is written to a temporary name; once it is complete, the newest one becomes the previous
// one and the new file takes its name. A write that dies leaves the last good checkpoint (under one name or
// the other) and at most a temporary file (which the next write removes and the reader never looks at); a
// checkpoint damaged later (a flipped bit) fails its checksums, and the previous one is used instead.
// Version 1 files (before checksums) are still read.
#pragma once

#include "common/paths.h"
#include "runtime/model_io/safetensors.h"
#include "runtime/model_io/tensor.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train::model_io {

constexpr std::string_view checkpoint_file_name = JobPaths::checkpoint_file_name;
constexpr std::string_view previous_checkpoint_file_name = "checkpoint.previous.safetensors";
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
  std::string source;  // the file it was read from, for messages
  CheckpointState state;
  std::vector<Tensor> model;     // in the order written
  std::vector<Tensor> momentum;  // names without the prefix: the parameter's name
};

// "fnv1a64:0123456789abcdef" over the canonical (key-sorted, compact) JSON text.
std::string identity_fingerprint(const nlohmann::json& identity);

std::filesystem::path checkpoint_path(const std::filesystem::path& directory);
std::filesystem::path previous_checkpoint_path(const std::filesystem::path& directory);

// Writes `directory`/checkpoint.safetensors atomically, keeping the one it replaces as
// checkpoint.previous.safetensors, creating the directory if needed, after removing temporary files that an
// interrupted earlier write left. Momentum tensors are named by their parameter. Throws
// std::invalid_argument for a model tensor whose name starts with "optimizer.", a momentum tensor for no
// model tensor or of another shape, or rng_state that is not UTF-8; EnvironmentError for a full, read-only
// or forbidden disk; std::runtime_error for other I/O errors.
void write_checkpoint(const std::filesystem::path& directory, const CheckpointState& state,
                      const std::vector<TensorView>& model, const std::vector<TensorView>& momentum);

// The newest checkpoint in `directory` (checkpoint.safetensors), or nullopt when there is none. Throws
// SafetensorsError (naming the file, and the tensor if one is at fault) when there is one that is not a
// valid checkpoint.
std::optional<Checkpoint> read_checkpoint(const std::filesystem::path& directory);

// Which checkpoint a job resumes from: the newest that is whole, checksums and all. In a multi-host job
// only the master host has the files, so rank 0 chooses and sends the bytes to every rank, which parses
// them with parse_checkpoint.
struct CheckpointChoice {
  std::optional<std::string> bytes;      // the chosen file's bytes; nullopt when no checkpoint can be used
  std::optional<Checkpoint> checkpoint;  // those bytes, parsed (rank 0 resumes from it without parsing again)
  std::filesystem::path path;            // the chosen file
  std::vector<std::string> rejected;     // every newer checkpoint that exists but cannot be used, and why
  bool found_any() const { return bytes.has_value() || !rejected.empty(); }
};
CheckpointChoice choose_checkpoint(const std::filesystem::path& directory);
Checkpoint parse_checkpoint(std::string_view bytes, std::string_view source);

// After resuming from the previous checkpoint because the newest is damaged: renames the newest to
// checkpoint.damaged.safetensors (kept for a look, never read), so that the next checkpoint written does
// not push the good previous one out. Returns the new name. Throws like write_checkpoint.
std::filesystem::path set_aside_damaged_checkpoint(const std::filesystem::path& directory);

// The error for a directory whose checkpoints are all damaged: what was found, and what to delete.
std::string no_usable_checkpoint_message(const std::filesystem::path& directory,
                                         const std::vector<std::string>& rejected);

// Why this job must not resume from a checkpoint with state `found`, or nullopt when it may: the
// hyperparameters in `identity` must equal the checkpoint's. The message names each one that differs.
std::optional<std::string> resume_refusal(const CheckpointState& found, const nlohmann::json& identity,
                                          std::string_view source);

}  // namespace train::model_io
