// The hyperparameters that belong to the platform rather than to the job's own settings. SageMaker's SDK
// adds keys that start with `sagemaker_` (sagemaker_program, sagemaker_region, its tuner's
// sagemaker_estimator_class_name and sagemaker_estimator_module, ...), automatic model tuning adds
// `_tuning_objective_metric`, and the training toolkit reads a few of them (its params.py). train
// recognises all of them as the platform's: it honours those that mean something to it (below) and
// ignores the rest, instead of rejecting them as unknown settings.
#pragma once

#include "common/config_error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train {

// True for every key of the platform: the `sagemaker_` prefix, or one of the toolkit's own keys.
bool is_platform_key(std::string_view key);

// True for the platform keys the toolkit consumes itself (its SAGEMAKER_HYPERPARAMETERS); the toolkit
// passes every other `sagemaker_` key on as an "additional framework parameter".
bool is_toolkit_key(std::string_view key);

// What train does with the platform keys it honours. Every value is as the toolkit decodes it.
struct PlatformSettings {
  // sagemaker_mpi_num_processes: the job's rank count (the toolkit's mpirun -np).
  std::optional<int64_t> num_processes;
  // sagemaker_distribution_instance_groups: the instance groups whose hosts train (heterogeneous clusters).
  std::optional<std::vector<std::string>> distribution_instance_groups;
  std::string job_name;             // sagemaker_job_name: SAGEMAKER_JOB_NAME
  std::string region;               // sagemaker_region: SAGEMAKER_REGION
};

// Reads the platform keys of `decoded` (every key of hyperparameters.json, JSON-decoded). A key train acts
// on with a value it cannot use is added to `problems` with what was expected.
PlatformSettings read_platform_settings(const nlohmann::json& decoded, ConfigProblems& problems);

}  // namespace train
