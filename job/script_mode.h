// Script mode, as the SageMaker SDK asks for it: the job names a program (the `sagemaker_program`
// hyperparameter, or the SAGEMAKER_PROGRAM variable, which wins, as in the toolkit's environment.py), and
// `train` runs it instead of its own training, with the runner the SDK's distribution keys choose (the
// toolkit's trainer.py and its PyTorch flavour's training.py). docs/script-mode-launch.md.
#pragma once

#include "common/environment_map.h"
#include "common/paths.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train {

struct JobDescription;

struct ScriptMode {
  std::string program;           // relative to the code folder, as named
  std::string named_by;          // "the SAGEMAKER_PROGRAM variable" or "hyperparameter `sagemaker_program`"
  std::string submit_directory;  // sagemaker_submit_directory (else SAGEMAKER_SUBMIT_DIRECTORY), decoded; "": the code folder
};

// Whether the job names a program, read before the job description (which then describes a user's command,
// not train's own training). A hyperparameters.json that cannot be read is left to the job description's
// report. ConfigError for a sagemaker_program that is not a string.
std::optional<ScriptMode> script_mode_of(const JobPaths& paths, const EnvironmentMap& environment);

// How the program's ranks are started, from the SDK's distribution keys.
enum class ScriptRunner {
  single_process,     // no key: one process on every training host (the toolkit's ProcessRunner)
  mpi,                // sagemaker_mpi_enabled: ranks over every host by mpirun
  torch_distributed,  // sagemaker_torch_distributed_enabled: the same launch (torchrun's environment on every rank)
  pytorch_ddp,        // sagemaker_pytorch_ddp_enabled: the same launch
};
std::string_view to_string(ScriptRunner runner);  // "mpi", ...

struct RunnerChoice {
  ScriptRunner runner = ScriptRunner::single_process;
  std::string because;  // the key that chose it, or "no distribution key"
};

// The runner the toolkit would use for `decoded` (hyperparameters.json, each value JSON-decoded), keys read
// with Python's truth as the toolkit reads them. A distribution this image cannot serve (smdistributed's data
// or model parallel library, parameter_server, PyTorch XLA, TensorFlow's MultiWorkerMirroredStrategy) is a
// ConfigError that says what to use instead.
RunnerChoice choose_runner(const nlohmann::json& decoded);

// The hyperparameters of train's own ResNet training that a script-mode job sets: they reach the program as
// its arguments, as every hyperparameter does, but train's own training does not run.
std::vector<std::string> own_training_keys(const nlohmann::json& decoded);

// The single-process runner's one rank per training host; the others keep the job's ranks per host (the
// toolkit's sagemaker_mpi_num_of_processes_per_host, else the host's GPUs, else 1). A warning in the job when
// a rank count the job asked for is not used.
void apply_runner(JobDescription& job, const RunnerChoice& runner);

}  // namespace train
