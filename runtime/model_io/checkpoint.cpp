#include "runtime/model_io/checkpoint.h"

#include "common/atomic_file.h"
#include "common/environment_error.h"
#include "common/json_file.h"
#include "runtime/model_io/tensor_checksums.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

namespace train::model_io {

namespace {

constexpr std::string_view format_value = "train checkpoint";
constexpr std::string_view format_version = "2";            // what is written: with tensor checksums
constexpr std::string_view format_version_unchecked = "1";  // still read: written before checksums
constexpr std::string_view damaged_checkpoint_file_name = "checkpoint.damaged.safetensors";

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

nlohmann::json state_json(const CheckpointState& state) {
  return {
      {"step", state.step},
      {"epoch", state.epoch},
      {"step_in_epoch", state.step_in_epoch},
      {"world_size", state.world_size},
      {"rng_state", state.rng_state},
      {"identity", state.identity},
      {"fingerprint", state.fingerprint()},
      {"version", state.version},
  };
}

CheckpointState parse_state(const std::string& text, const std::string& source) {
  CheckpointState state;
  try {
    // Bounded as the header is (a JsonTooDeep says so): the identity below is copied and dumped recursively.
    auto json = nlohmann::json::parse(text, json_depth_limited<nlohmann::json>());
    state.step = json.at("step").get<int64_t>();
    state.epoch = json.at("epoch").get<int64_t>();
    state.step_in_epoch = json.at("step_in_epoch").get<int64_t>();
    state.world_size = json.at("world_size").get<int>();
    state.rng_state = json.at("rng_state").get<std::string>();
    state.identity = json.at("identity");
    state.version = json.value("version", "");
    if (!state.identity.is_object()) throw std::runtime_error("\"identity\" is not an object");
    if (state.step < 0 || state.epoch < 0 || state.step_in_epoch < 0 || state.world_size < 0) {
      throw std::runtime_error("negative step, epoch, step_in_epoch or world_size");
    }
    std::string fingerprint = json.at("fingerprint").get<std::string>();
    if (fingerprint != state.fingerprint()) {
      throw std::runtime_error(fmt::format("fingerprint {} does not match its identity ({})", fingerprint,
                                           state.fingerprint()));
    }
  } catch (const std::exception& error) {
    throw SafetensorsError(fmt::format("{}: invalid checkpoint state: {}", source, error.what()));
  }
  return state;
}

}  // namespace

std::string identity_fingerprint(const nlohmann::json& identity) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (unsigned char byte : identity.dump()) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  }
  return fmt::format("fnv1a64:{:016x}", hash);
}

std::string CheckpointState::fingerprint() const { return identity_fingerprint(identity); }

std::filesystem::path checkpoint_path(const std::filesystem::path& directory) {
  return directory / checkpoint_file_name;
}

std::filesystem::path previous_checkpoint_path(const std::filesystem::path& directory) {
  return directory / previous_checkpoint_file_name;
}

void write_checkpoint(const std::filesystem::path& directory, const CheckpointState& state,
                      const std::vector<TensorView>& model, const std::vector<TensorView>& momentum) {
  std::map<std::string_view, const TensorView*> parameters;
  for (const auto& tensor : model) {
    if (starts_with(tensor.name, "optimizer.")) {
      throw std::invalid_argument(
          fmt::format("checkpoint: model tensor \"{}\": names starting with \"optimizer.\" are reserved", tensor.name));
    }
    parameters[tensor.name] = &tensor;
  }
  std::vector<TensorView> tensors = model;
  for (const auto& buffer : momentum) {
    auto it = parameters.find(buffer.name);
    if (it == parameters.end() || it->second->shape != buffer.shape) {
      throw std::invalid_argument(fmt::format(
          "checkpoint: momentum \"{}\" {} matches no model tensor of that name and shape", buffer.name,
          shape_text(buffer.shape)));
    }
    TensorView view = buffer;
    view.name = std::string(momentum_prefix) + buffer.name;
    tensors.push_back(std::move(view));
  }
  std::string state_text;
  try {
    state_text = state_json(state).dump();
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(fmt::format("checkpoint state cannot be written: {}", error.what()));
  }

  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw_file_error("create the checkpoint directory", directory.string(), error.value());
  const std::string path = checkpoint_path(directory).string();
  const std::string previous = previous_checkpoint_path(directory).string();
  remove_stale_temporaries(path);  // the previous checkpoint is only ever renamed, never written
  const Metadata metadata = with_tensor_checksums(tensors, {{"format", std::string(format_value)},
                                                            {"format_version", std::string(format_version)},
                                                            {"state", state_text}});
  AtomicFile file(path);
  write_safetensors(file, tensors, metadata);
  // The new file is complete: the one it replaces becomes the previous checkpoint. A crash between the two
  // renames leaves no newest file, and the reader takes the previous one.
  if (::rename(path.c_str(), previous.c_str()) != 0 && errno != ENOENT) {
    throw_file_error("keep the previous checkpoint as", previous, errno);
  }
  file.commit();
}

std::filesystem::path set_aside_damaged_checkpoint(const std::filesystem::path& directory) {
  const std::filesystem::path damaged = directory / damaged_checkpoint_file_name;
  if (::rename(checkpoint_path(directory).c_str(), damaged.c_str()) != 0) {
    throw_file_error("set aside the damaged checkpoint as", damaged.string(), errno);
  }
  return damaged;
}

namespace {

Checkpoint checkpoint_from(SafetensorsFile file, const std::string& source) {
  auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != format_value) {
    throw SafetensorsError(fmt::format("{}: not a train checkpoint (its metadata has no \"format\": \"{}\")",
                                       source, format_value));
  }
  auto version = file.metadata.find("format_version");
  if (version == file.metadata.end() ||
      (version->second != format_version && version->second != format_version_unchecked)) {
    throw SafetensorsError(fmt::format("{}: checkpoint format version {}, this train reads versions {} and {}",
                                       source, version == file.metadata.end() ? "(none)" : version->second,
                                       format_version_unchecked, format_version));
  }
  // The reader has checked the checksums that are there; from version 2 on they must be there.
  if (version->second == format_version) require_tensor_checksums(file, source);
  auto state = file.metadata.find("state");
  if (state == file.metadata.end()) throw SafetensorsError(fmt::format("{}: checkpoint has no state", source));

  Checkpoint checkpoint;
  checkpoint.source = source;
  checkpoint.state = parse_state(state->second, source);
  for (auto& tensor : file.tensors) {
    if (starts_with(tensor.name, momentum_prefix)) {
      tensor.name = tensor.name.substr(momentum_prefix.size());
      checkpoint.momentum.push_back(std::move(tensor));
    } else {
      checkpoint.model.push_back(std::move(tensor));
    }
  }
  std::map<std::string_view, const Tensor*> parameters;
  for (const auto& tensor : checkpoint.model) parameters[tensor.name] = &tensor;
  for (const auto& buffer : checkpoint.momentum) {
    auto it = parameters.find(buffer.name);
    if (it == parameters.end() || it->second->shape != buffer.shape) {
      throw SafetensorsError(fmt::format("{}: tensor \"{}{}\": momentum for no model tensor of shape {}", source,
                                         momentum_prefix, buffer.name, shape_text(buffer.shape)));
    }
  }
  return checkpoint;
}

}  // namespace

std::optional<Checkpoint> read_checkpoint(const std::filesystem::path& directory) {
  const std::filesystem::path path = checkpoint_path(directory);
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  return checkpoint_from(read_safetensors(path.string()), path.string());
}

CheckpointChoice choose_checkpoint(const std::filesystem::path& directory) {
  CheckpointChoice choice;
  for (const auto& path : {checkpoint_path(directory), previous_checkpoint_path(directory)}) {
    try {
      auto bytes = read_file_bytes(path.string());
      if (!bytes) continue;
      choice.checkpoint = parse_checkpoint(*bytes, path.string());  // whole, consistent, checksums right
      choice.bytes = std::move(bytes);
      choice.path = path;
      return choice;
    } catch (const SafetensorsError& error) {
      choice.rejected.push_back(error.what());
    }
  }
  return choice;
}

std::string no_usable_checkpoint_message(const std::filesystem::path& directory,
                                         const std::vector<std::string>& rejected) {
  return fmt::format("no checkpoint in {} can be resumed from: {}. Delete the damaged file{} to start training "
                     "afresh (rm {}/checkpoint*.safetensors), or put back a good copy (SageMaker keeps the job's "
                     "checkpoints in its S3 checkpoint location)",
                     directory.string(), fmt::join(rejected, "; "), rejected.size() == 1 ? "" : "s",
                     directory.string());
}

Checkpoint parse_checkpoint(std::string_view bytes, std::string_view source) {
  return checkpoint_from(parse_safetensors(bytes, source), std::string(source));
}

std::optional<std::string> resume_refusal(const CheckpointState& found, const nlohmann::json& identity,
                                          std::string_view source) {
  if (found.identity == identity) return std::nullopt;
  std::set<std::string> keys;
  for (const auto& [key, value] : found.identity.items()) keys.insert(key);
  if (identity.is_object()) {
    for (const auto& [key, value] : identity.items()) keys.insert(key);
  }
  std::vector<std::string> differences;
  for (const auto& key : keys) {
    bool in_checkpoint = found.identity.contains(key);
    bool in_job = identity.is_object() && identity.contains(key);
    if (in_checkpoint && in_job && found.identity[key] == identity[key]) continue;
    differences.push_back(fmt::format("{} {} there, {} here", key,
                                      in_checkpoint ? found.identity[key].dump() : "(absent)",
                                      in_job ? identity[key].dump() : "(absent)"));
  }
  return fmt::format("{} was written by a job with other hyperparameters ({}), so this job cannot resume from "
                     "it; remove it, or give this job a checkpoint location of its own",
                     source, fmt::join(differences, "; "));
}

}  // namespace train::model_io
