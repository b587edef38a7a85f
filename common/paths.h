// Where SageMaker puts things, under /opt/ml or under SAGEMAKER_BASE_DIR when that is set.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace train {

// SageMaker's own /opt/ml, which paths in a job's config files and hyperparameters name.
inline const std::filesystem::path sagemaker_base_path = "/opt/ml";

struct JobPaths {
  std::filesystem::path base = sagemaker_base_path;
  // `train validate DIR` may name the config directory itself; empty means base/input/config.
  std::filesystem::path config_override;

  // SAGEMAKER_BASE_DIR when set and non-empty, else /opt/ml.
  static JobPaths from_environment();

  std::filesystem::path input() const { return base / "input"; }
  std::filesystem::path config_dir() const {
    return config_override.empty() ? base / "input" / "config" : config_override;
  }
  std::filesystem::path resource_config() const { return config_dir() / "resourceconfig.json"; }
  std::filesystem::path hyperparameters() const { return config_dir() / "hyperparameters.json"; }
  std::filesystem::path input_data_config() const { return config_dir() / "inputdataconfig.json"; }
  std::filesystem::path checkpoint_config() const { return config_dir() / "checkpointconfig.json"; }
  std::filesystem::path tensorboard_config() const { return config_dir() / "tensorboardoutputconfig.json"; }
  std::filesystem::path data_dir() const { return base / "input" / "data"; }
  std::filesystem::path channel(const std::string& name) const { return data_dir() / name; }
  std::filesystem::path model() const { return base / "model"; }
  std::filesystem::path output() const { return base / "output"; }
  std::filesystem::path output_data() const { return base / "output" / "data"; }
  std::filesystem::path output_intermediate() const { return base / "output" / "intermediate"; }
  std::filesystem::path failure_file() const { return base / "output" / "failure"; }
  std::filesystem::path success_file() const { return base / "output" / "success"; }
  std::filesystem::path checkpoints() const { return base / "checkpoints"; }
  // The newest checkpoint (runtime/model_io/checkpoint.h has its format): the launcher looks at it after a
  // stop request to say whether one was written.
  static constexpr const char* checkpoint_file_name = "checkpoint.safetensors";
  std::filesystem::path tensorboard() const { return base / "output" / "tensorboard"; }
  // The user's code in script mode (sagemaker_submit_directory is fetched there).
  std::filesystem::path code() const { return base / "code"; }

  // An absolute path a job names, as this job sees it: normalised, and under a relocated base a path below
  // /opt/ml is taken below `base`. nullopt for a path that starts at /opt/ml and climbs out of it through
  // ".." when the base is relocated (/opt/ml/checkpoints/../../x): it would leave the job's own folder.
  std::optional<std::filesystem::path> relocated(const std::filesystem::path& given) const;
};

}  // namespace train
