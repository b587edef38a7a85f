#include "job/job_description.h"

#include "common/config_error.h"
#include "common/json_file.h"
#include "job/gpu_inventory.h"

#include <fmt/format.h>
#include <sched.h>

#include <thread>

namespace train {

HostResources detect_host_resources() {
  HostResources resources;
  GpuInventory inventory = query_gpus();
  resources.gpus = static_cast<int>(inventory.gpus.size());
  resources.gpu_note = inventory.note;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
    resources.cpus = std::max(1, CPU_COUNT(&mask));
  } else {
    resources.cpus = std::max(1u, std::thread::hardware_concurrency());
  }
  return resources;
}

namespace {

// Runs one loader, turning its ConfigError into a collected problem so the others still run.
template <typename Loader>
void collect(ConfigProblems& problems, Loader&& loader) {
  try {
    loader();
  } catch (const ConfigError& error) {
    problems.add(error.what());
  }
}

void resolve_device_and_ranks(JobDescription& job, CheckMode mode, ConfigProblems& problems) {
  const auto& hp = job.hyperparameters;
  const std::string& wanted = hp.text("device");
  auto host_problem = [&](std::string message) {
    if (mode == CheckMode::this_host) problems.add(std::move(message));
    else job.warnings.push_back(std::move(message) + " (on the machine that ran `train validate`)");
  };
  if (wanted == "cuda" && job.resources.gpus == 0) {
    host_problem(fmt::format("hyperparameter `device` is \"cuda\" but this host has no usable GPU ({}); use "
                             "device=auto or device=cpu, or run on a GPU instance",
                             job.resources.gpu_note));
  }
  job.device = (wanted == "cpu" || job.resources.gpus == 0) ? "cpu" : "cuda";

  if (auto given = hp.optional_integer("processes_per_host")) {
    job.ranks_per_host = static_cast<int>(*given);
  } else {
    // One rank per GPU; on a CPU host one rank drives every core through its threads.
    job.ranks_per_host = job.device == "cuda" ? job.resources.gpus : 1;
  }
  if (job.device == "cuda" && job.ranks_per_host > job.resources.gpus) {
    host_problem(fmt::format("hyperparameter `processes_per_host` is {} but this host has {} GPU{}; each rank needs "
                             "its own GPU, so use at most {}",
                             job.ranks_per_host, job.resources.gpus, job.resources.gpus == 1 ? "" : "s",
                             job.resources.gpus));
  }

  if (hp.has("precision_dtype")) {
    job.precision = hp.text("precision_dtype");
  } else {
    job.precision = job.device == "cuda" ? "bfloat16" : "float32";
  }
  if (job.precision == "bfloat16" && job.device == "cpu") {
    std::string message = "hyperparameter `precision_dtype` is \"bfloat16\" but training runs on the CPU, which "
                          "trains in float32; remove precision_dtype or set it to float32";
    // With device=cpu this is wrong on every host; with device=auto it depends on the host's GPUs; with
    // device=cuda the missing GPU was reported above.
    if (wanted == "cpu") problems.add(std::move(message));
    else if (wanted == "auto") host_problem(std::move(message));
  }

  int64_t batch = hp.integer("mini_batch_size");
  if (job.ranks_per_host > 0 && batch % job.ranks_per_host != 0) {
    problems.add(fmt::format("hyperparameter `mini_batch_size` is {} but it is split evenly over the {} ranks of "
                             "each host; use a multiple of {}",
                             batch, job.ranks_per_host, job.ranks_per_host));
  }
}

}  // namespace

JobDescription load_job_description(const JobPaths& paths, const EnvironmentMap& environment,
                                    const HostResources& resources, CheckMode mode) {
  JobDescription job;
  job.paths = paths;
  job.resources = resources;
  ConfigProblems problems;

  std::error_code error;
  const bool has_resource_config = std::filesystem::exists(paths.resource_config(), error);
  collect(problems, [&] {
    if (has_resource_config) {
      job.resource_config = read_resource_config(paths.resource_config());
      job.cluster = cluster_from_sagemaker(*job.resource_config);
    } else if (is_batch_multinode(environment)) {
      job.cluster = cluster_from_batch(environment);
    } else {
      job.cluster = cluster_for_local_host(local_host_name());
    }
  });
  if (auto interface = lookup(environment, "TRAIN_NETWORK_INTERFACE")) {
    if (!is_valid_interface_name(*interface)) {
      problems.add(fmt::format("environment variable TRAIN_NETWORK_INTERFACE: expected an interface name such as "
                               "\"eth0\", got {}",
                               quote_json_for_message(nlohmann::json(*interface))));
    } else {
      job.cluster.network_interface = *interface;
    }
  }

  bool hyperparameters_ok = false;
  collect(problems, [&] {
    job.hyperparameters = read_hyperparameters(paths.hyperparameters());
    hyperparameters_ok = true;
  });
  collect(problems, [&] {
    if (std::filesystem::exists(paths.input_data_config(), error)) {
      job.input = read_input_data_config(paths.input_data_config());
    }
  });
  if (hyperparameters_ok) resolve_device_and_ranks(job, mode, problems);

  for (const auto& channel : job.input.channels) {
    if (channel.mode == InputMode::pipe) continue;  // Pipe FIFOs appear only once training starts
    if (!std::filesystem::is_directory(paths.channel(channel.name), error)) {
      job.warnings.push_back(fmt::format("channel \"{}\" ({} mode) has no directory {} yet", channel.name,
                                         to_string(channel.mode), paths.channel(channel.name).string()));
    }
  }
  problems.throw_if_any();
  return job;
}

nlohmann::json describe_effective_configuration(const JobDescription& job) {
  nlohmann::json channels = nlohmann::json::array();
  for (const auto& channel : job.input.channels) {
    channels.push_back({{"name", channel.name},
                        {"mode", to_string(channel.mode)},
                        {"distribution", to_string(channel.distribution)},
                        {"record_wrapper", to_string(channel.record_wrapper)},
                        {"path", job.paths.channel(channel.name).string()}});
  }
  nlohmann::json hyperparameters = job.hyperparameters.effective();
  hyperparameters["precision_dtype"] = job.precision;
  return {
      {"platform", to_string(job.cluster.platform)},
      {"hosts", job.cluster.hosts},
      {"current_host", job.cluster.current_host},
      {"master_host", job.cluster.master_host},
      {"is_master", job.cluster.is_master()},
      {"network_interface", job.cluster.network_interface},
      {"device", job.device},
      {"gpus_on_this_host", job.resources.gpus},
      {"cpus_on_this_host", job.resources.cpus},
      {"ranks_per_host", job.ranks_per_host},
      {"world_size", job.world_size()},
      {"base_dir", job.paths.base.string()},
      {"channels", channels},
      {"hyperparameters", hyperparameters},
      {"warnings", job.warnings},
  };
}

}  // namespace train
