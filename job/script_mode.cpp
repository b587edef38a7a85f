#include "job/script_mode.h"

#include "common/config_error.h"
#include "common/json_file.h"
#include "job/hyperparameter_schema.h"
#include "job/hyperparameters.h"
#include "job/job_description.h"

#include <fmt/format.h>

#include <filesystem>

namespace train {

namespace {

// Python's truth of a JSON-decoded value, as the toolkit tests `additional_framework_parameters.get(KEY)`.
bool python_truth(const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number()) return value.get<double>() != 0.0;
  if (value.is_string() || value.is_array() || value.is_object()) return !value.empty();
  return false;
}

bool enabled(const nlohmann::json& decoded, const char* key) {
  return decoded.contains(key) && python_truth(decoded.at(key));
}

std::optional<std::string> decoded_text(const nlohmann::json& decoded, const char* key, const std::string& what) {
  if (!decoded.contains(key)) return std::nullopt;
  const auto& value = decoded.at(key);
  if (!value.is_string()) {
    throw ConfigError(fmt::format("{} is {}, not a file name; the SDK sends the entry point as a JSON string such as "
                                  "\"\\\"train.py\\\"\"",
                                  what, value.dump()));
  }
  return value.get<std::string>();
}

}  // namespace

std::optional<ScriptMode> script_mode_of(const JobPaths& paths, const EnvironmentMap& environment) {
  nlohmann::json decoded = nlohmann::json::object();
  // Read as the job description reads it (a regular file, bounded size and depth): a FIFO or a huge file in its
  // place must not hang or exhaust this look. A file that cannot be read names no program here; the job
  // description reads it again and reports what is wrong with it, with the job's other problems.
  try {
    std::error_code missing;
    if (std::filesystem::exists(paths.hyperparameters(), missing)) {
      const auto document = parse_json_text(read_small_file(paths.hyperparameters(), max_config_file_bytes),
                                            paths.hyperparameters().string());
      if (document.is_object()) {
        for (const auto& [key, value] : document.items()) decoded[key] = decode_hyperparameter_value(value);
      }
    }
  } catch (const ConfigError&) {
    return std::nullopt;
  }
  ScriptMode script;
  if (auto program = lookup(environment, "SAGEMAKER_PROGRAM")) {
    script.program = *program;
    script.named_by = "the SAGEMAKER_PROGRAM variable";
  } else if (auto named = decoded_text(decoded, "sagemaker_program", "hyperparameter `sagemaker_program`")) {
    script.program = *named;
    script.named_by = "hyperparameter `sagemaker_program`";
  } else {
    return std::nullopt;
  }
  if (auto directory = decoded_text(decoded, "sagemaker_submit_directory", "hyperparameter `sagemaker_submit_directory`")) {
    script.submit_directory = *directory;
  } else if (auto variable = lookup(environment, "SAGEMAKER_SUBMIT_DIRECTORY")) {
    script.submit_directory = *variable;
  }
  return script;
}

std::string_view to_string(ScriptRunner runner) {
  switch (runner) {
    case ScriptRunner::single_process: return "single process";
    case ScriptRunner::mpi: return "mpi";
    case ScriptRunner::torch_distributed: return "torch_distributed";
    case ScriptRunner::pytorch_ddp: return "pytorchddp";
  }
  return "?";
}

RunnerChoice choose_runner(const nlohmann::json& decoded) {
  struct Refused {
    const char* key;
    const char* what;
    const char* instead;
  };
  static const Refused refused[] = {
      // The SDK (2.257) sends distribution={"pytorchddp": ...} this way too: it rewrites it to smdistributed's.
      {"sagemaker_distributed_dataparallel_enabled",
       "smdistributed's data parallel library (smddp; the SDK sends distribution={\"pytorchddp\": ...} as it too)",
       "use distribution={\"torch_distributed\": {\"enabled\": True}}: the same DDP program runs with torchrun's "
       "environment on every rank (gloo or NCCL)"},
      {"mp_parameters", "smdistributed's model parallel library (smp)",
       "use an AWS Deep Learning Container that ships smdistributed, or PyTorch's own FSDP under "
       "distribution={\"torch_distributed\": {\"enabled\": True}}"},
      {"sagemaker_parameter_server_enabled", "TensorFlow's parameter_server",
       "use distribution={\"mpi\": {\"enabled\": True}} or {\"torch_distributed\": {\"enabled\": True}}"},
      {"sagemaker_multi_worker_mirrored_strategy_enabled", "TensorFlow's MultiWorkerMirroredStrategy",
       "use distribution={\"mpi\": {\"enabled\": True}} or {\"torch_distributed\": {\"enabled\": True}}"},
      {"sagemaker_pytorch_xla_multi_worker_enabled", "PyTorch XLA (Training Compiler)",
       "use distribution={\"torch_distributed\": {\"enabled\": True}}"},
  };
  for (const auto& refusal : refused) {
    if (enabled(decoded, refusal.key)) {
      throw ConfigError(fmt::format("hyperparameter `{}` asks for {}, which this image does not have, so its ranks "
                                    "cannot start; {}",
                                    refusal.key, refusal.what, refusal.instead));
    }
  }
  // The PyTorch toolkit's order: mpi first, then pytorchddp, then torch_distributed.
  if (enabled(decoded, "sagemaker_mpi_enabled")) return {ScriptRunner::mpi, "sagemaker_mpi_enabled"};
  if (enabled(decoded, "sagemaker_pytorch_ddp_enabled")) return {ScriptRunner::pytorch_ddp, "sagemaker_pytorch_ddp_enabled"};
  if (enabled(decoded, "sagemaker_torch_distributed_enabled")) {
    return {ScriptRunner::torch_distributed, "sagemaker_torch_distributed_enabled"};
  }
  return {ScriptRunner::single_process, "no distribution key"};
}

std::vector<std::string> own_training_keys(const nlohmann::json& decoded) {
  std::vector<std::string> keys;
  for (const auto& spec : hyperparameter_schema()) {
    if (!spec.launcher && decoded.contains(std::string(spec.name))) keys.emplace_back(spec.name);
  }
  return keys;
}

void apply_runner(JobDescription& job, const RunnerChoice& runner) {
  if (runner.runner != ScriptRunner::single_process || job.ranks_per_host == 1) return;
  if (job.hyperparameters.given("processes_per_host") || job.platform.num_processes) {
    job.warnings.push_back(fmt::format(
        "the job asks for {} ranks per host, but no distribution is enabled: the program runs once on every "
        "training host, as under the toolkit's single-process runner (enable distribution={{\"mpi\": ...}} or "
        "{{\"torch_distributed\": ...}} for more)",
        job.ranks_per_host));
  }
  job.ranks_per_host = 1;
}

}  // namespace train
