#include "job/job_description.h"

#include "common/config_error.h"
#include "common/json_file.h"
#include "common/train_variables.h"
#include "job/gpu_inventory.h"
#include "job/sagemaker_environment.h"
#include "job/training_hosts.h"
#include "job/training_requirements.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
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
  // Python's os.cpu_count() on Linux: the online CPUs, whatever this process's affinity.
  resources.host_cpus = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  return resources;
}

namespace {

std::vector<std::string> describe_groups(const ResourceConfig& config) {
  std::vector<std::string> names;
  for (const auto& group : config.instance_groups) names.push_back("\"" + group.name + "\"");
  return names;
}

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
  const bool own_training = job.workload == Workload::train_resnet;
  const DeviceChoice wanted = hp.device;  // a user command's: auto, the default
  auto host_problem = [&](std::string message) {
    if (mode == CheckMode::this_host) problems.add(std::move(message));
    else job.warnings.push_back(std::move(message) + " (on the machine that ran `train validate`)");
  };
  if (wanted == DeviceChoice::cuda && job.resources.gpus == 0) {
    host_problem(fmt::format("hyperparameter `device` is \"cuda\" but this host has no usable GPU ({}); use "
                             "device=auto or device=cpu, or run on a GPU instance",
                             job.resources.gpu_note));
  }
  job.device = (wanted == DeviceChoice::cpu || job.resources.gpus == 0) ? Device::cpu : Device::cuda;

  if (hp.processes_per_host) {
    job.ranks_per_host = *hp.processes_per_host;
  } else if (job.device == Device::cuda) {
    job.ranks_per_host = job.resources.gpus;  // one rank per GPU
  } else {
    // On a CPU host one rank drives every core through its threads. A user command on a Trainium host gets
    // one rank per NeuronCore, as the toolkit gives it.
    const int neurons = own_training ? 0 : neuron_cores(job.resource_config ? job.resource_config->current_instance_type : "");
    job.ranks_per_host = neurons > 0 ? neurons : 1;
  }
  if (const auto total = job.platform.num_processes; total && !job.cluster.hosts.empty()) {
    // The toolkit's -np: the job's rank count, spread evenly over the hosts that train.
    const auto hosts = static_cast<int64_t>(job.cluster.hosts.size());
    if (*total % hosts != 0) {
      problems.add(fmt::format("hyperparameter `sagemaker_mpi_num_processes` is {} but the job has {} training "
                               "host{}, each running the same number of ranks; use a multiple of {}",
                               *total, hosts, hosts == 1 ? "" : "s", hosts));
    } else if (hp.processes_per_host && *total != hosts * job.ranks_per_host) {
      problems.add(fmt::format("hyperparameters `sagemaker_mpi_num_processes` ({} ranks) and processes_per_host ({} "
                               "per host on {} host{}) disagree; set only one",
                               *total, job.ranks_per_host, hosts, hosts == 1 ? "" : "s"));
    } else {
      job.ranks_per_host = static_cast<int>(*total / hosts);
    }
  }
  if (job.device == Device::cuda && job.ranks_per_host > job.resources.gpus && job.ranks_share_gpus) {
    job.warnings.push_back(fmt::format("TRAIN_RANKS_SHARE_GPUS=1: {} ranks share this host's {} GPU{}, each rank "
                                       "talking to the others as if from a host of its own (for checks, not speed)",
                                       job.ranks_per_host, job.resources.gpus, job.resources.gpus == 1 ? "" : "s"));
  } else if (job.device == Device::cuda && job.ranks_per_host > job.resources.gpus) {
    host_problem(fmt::format("hyperparameter `processes_per_host` is {} but this host has {} GPU{}; each rank needs "
                             "its own GPU, so use at most {}",
                             job.ranks_per_host, job.resources.gpus, job.resources.gpus == 1 ? "" : "s",
                             job.resources.gpus));
  }

  job.precision = hp.precision_dtype.value_or(job.device == Device::cuda ? Precision::bfloat16 : Precision::float32);
  if (!own_training) return;  // precision and batch are train's own training's
  if (job.precision == Precision::bfloat16 && job.device == Device::cpu) {
    std::string message = "hyperparameter `precision_dtype` is \"bfloat16\" but training runs on the CPU, which "
                          "trains in float32; remove precision_dtype or set it to float32";
    // With device=cpu this is wrong on every host; with device=auto it depends on the host's GPUs; with
    // device=cuda the missing GPU was reported above.
    if (wanted == DeviceChoice::cpu) problems.add(std::move(message));
    else if (wanted == DeviceChoice::automatic) host_problem(std::move(message));
  }

  // mini_batch_size is per host and split over the host's ranks, as SageMaker's built-in algorithm splits it
  // (job/training_requirements.cpp holds each rank to at least two images).
  const int batch = hp.mini_batch_size;
  if (job.ranks_per_host > 0 && batch % job.ranks_per_host != 0) {
    problems.add(fmt::format("hyperparameter `mini_batch_size` is {} but it is split evenly over the {} ranks of "
                             "each host; use a multiple of {}",
                             batch, job.ranks_per_host, job.ranks_per_host));
  }
  job.batch_per_rank = job.ranks_per_host > 0 ? batch / job.ranks_per_host : 0;
  job.bucket_bytes = static_cast<size_t>(hp.fusion_threshold_mb * 1024.0 * 1024.0);
}

}  // namespace

JobDescription load_job_description(const JobPaths& paths, const EnvironmentMap& environment,
                                    const HostResources& resources, CheckMode mode, Workload workload) {
  JobDescription job;
  job.paths = paths;
  job.workload = workload;
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
      // A SageMaker-like folder without resourceconfig.json: most likely a multi-host rehearsal that lost it,
      // which would otherwise quietly become a one-host job.
      if (std::filesystem::exists(paths.config_dir(), error) || lookup(environment, "SAGEMAKER_BASE_DIR")) {
        job.warnings.push_back(fmt::format("no resource config found ({} does not exist): this is a one-host local "
                                           "job on host \"{}\" (its own host name); write resourceconfig.json "
                                           "(current_host, hosts) for a SageMaker job of several hosts",
                                           paths.resource_config().string(), job.cluster.current_host));
      }
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
  for (auto& problem : train_variable_problems(environment)) problems.add(std::move(problem));

  bool hyperparameters_ok = false;
  collect(problems, [&] {
    job.hyperparameters = read_hyperparameters(paths.hyperparameters(), workload);
    hyperparameters_ok = true;
  });
  job.platform = read_platform_settings(job.hyperparameters.decoded(), problems);
  job.distribution = distribution_groups(job.hyperparameters.toolkit_values(), job.resource_config);
  collect(problems, [&] {
    if (job.platform.distribution_instance_groups && job.resource_config) {
      select_training_hosts(job.cluster, *job.resource_config, *job.platform.distribution_instance_groups,
                            job.warnings);
    } else if (!job.distribution.names.empty() && job.resource_config && !job.resource_config->instance_groups.empty()) {
      // A distribution enabled (sagemaker_mpi_enabled, ...) without naming its groups: the toolkit trains this
      // host's own group, so on a heterogeneous cluster each group runs an MPI world of its own.
      const bool heterogeneous = job.resource_config->instance_groups.size() > 1;
      if (heterogeneous && workload == Workload::train_resnet) {
        throw ConfigError(fmt::format(
            "this heterogeneous cluster (instance groups {}) enables a distribution (sagemaker_mpi_enabled or "
            "another sagemaker_*_enabled hyperparameter) without naming the groups that train, so each group "
            "would train a model of its own into the same checkpoints; name them in the hyperparameter "
            "sagemaker_distribution_instance_groups (the SDK's distribution={{\"instance_groups\": [...]}})",
            fmt::join(describe_groups(*job.resource_config), ", ")));
      }
      select_training_hosts(job.cluster, *job.resource_config, job.distribution.names, job.warnings);
      if (heterogeneous) {
        job.warnings.push_back(fmt::format(
            "a distribution is enabled without sagemaker_distribution_instance_groups: as under the toolkit, "
            "each instance group runs its own MPI world, and this host's is group \"{}\" ({}); name the groups "
            "in sagemaker_distribution_instance_groups to run one world over them",
            job.distribution.names.front(), fmt::join(job.cluster.hosts, ", ")));
      }
    }
  });
  collect(problems, [&] { job.outputs = read_output_locations(paths); });
  bool input_ok = false;
  collect(problems, [&] {
    if (std::filesystem::exists(paths.input_data_config(), error)) {
      job.input = read_input_data_config(paths.input_data_config());
    }
    input_ok = true;
  });
  try {
    job.ranks_share_gpus = read_flag_variable(environment, FlagVariable::ranks_share_gpus);
  } catch (const ConfigError&) {
    // said among train_variable_problems' above
  }
  if (hyperparameters_ok) {
    resolve_device_and_ranks(job, mode, problems);
    if (workload == Workload::train_resnet) {
      check_training_requirements(job, input_ok, problems);
      collect(problems, [&] { job.timeline = timeline_steps(job.hyperparameters, environment); });
    } else {
      for (auto& problem : what_no_command_can_carry(job, environment)) problems.add(std::move(problem));
    }
  }

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
  nlohmann::json platform_keys = nlohmann::json::object();
  nlohmann::json command_keys = nlohmann::json::object();
  for (const auto& [key, value] : job.hyperparameters.decoded().items()) {
    if (is_platform_key(key)) platform_keys[key] = value;
    else command_keys[key] = value;  // a command gets every key that is not the platform's, the launcher's too
  }
  if (job.workload == Workload::train_resnet) hyperparameters["precision_dtype"] = precision_name(job.precision);
  std::vector<std::string> idle_hosts;
  for (const auto& host : job.cluster.all_hosts) {
    if (std::find(job.cluster.hosts.begin(), job.cluster.hosts.end(), host) == job.cluster.hosts.end()) {
      idle_hosts.push_back(host);
    }
  }
  nlohmann::json description = {
      {"platform", to_string(job.cluster.platform)},
      {"workload", job.workload == Workload::train_resnet ? "train's own ResNet training" : "a user command"},
      {"hosts", job.cluster.all_hosts},
      {"training_hosts", job.cluster.hosts},
      {"hosts_not_training", idle_hosts},
      {"current_host", job.cluster.current_host},
      {"this_host_trains", job.cluster.trains_here()},
      {"master_host", job.cluster.master_host},
      {"is_master", job.cluster.is_master()},
      {"network_interface", job.cluster.network_interface},
      {"device", device_name(job.device)},
      {"gpus_on_this_host", job.resources.gpus},
      {"cpus_on_this_host", job.resources.cpus},
      {"ranks_per_host", job.ranks_per_host},
      {"world_size", job.world_size()},
      {"base_dir", job.paths.base.string()},
      {"checkpoint_dir", job.outputs.checkpoints.string()},
      {"tensorboard_dir", job.outputs.tensorboard.string()},
      {"channels", channels},
      {"hyperparameters", hyperparameters},
      {"platform_hyperparameters", platform_keys},
      {"warnings", job.warnings},
  };
  if (job.platform.distribution_instance_groups) {
    description["training_instance_groups"] = *job.platform.distribution_instance_groups;
  }
  // A user command's own hyperparameters, which reach it as SM_HP_* and command-line arguments.
  if (job.workload == Workload::user_command) description["command_hyperparameters"] = command_keys;
  return description;
}

}  // namespace train
