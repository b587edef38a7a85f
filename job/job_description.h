// Everything `train` knows about its job, read and checked in one place: the cluster, the
// hyperparameters, the channels, this host's resources, and what follows from them (device, ranks, the
// batch of each rank, the gradient buckets' size), each worked out once here and read as a field (the
// sagemaker-training toolkit's Environment). The launcher and every rank make it by the same call,
// load_job_description; nothing after it reads a hyperparameter by its name.
#pragma once

#include "common/environment_map.h"
#include "common/paths.h"
#include "job/cluster.h"
#include "job/hyperparameters.h"
#include "job/input_data_config.h"
#include "job/output_locations.h"
#include "job/platform_keys.h"
#include "job/resource_config.h"
#include "job/step_range.h"
#include "job/training_choices.h"
#include "job/training_hosts.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace train {

struct HostResources {
  int gpus = 0;
  int cpus = 1;       // the CPUs this process may run on (its affinity mask): what the ranks' threads share
  int host_cpus = 1;  // every CPU of the host, as the toolkit counts them for SM_NUM_CPUS (multiprocessing.cpu_count)
  std::string gpu_note;  // why gpus is 0, when it is
};

// Asks the CUDA runtime (when built with it), the CPU affinity mask and the host's online CPUs.
HostResources detect_host_resources();

// `this_host`: the job runs here now, so what this host lacks (GPUs) is an error.
// `offline`: `train validate` on any machine; what depends on the host becomes a warning.
enum class CheckMode { this_host, offline };

struct JobDescription {
  JobPaths paths;
  ClusterDescription cluster;
  std::optional<ResourceConfig> resource_config;  // SageMaker only
  Workload workload = Workload::train_resnet;
  Hyperparameters hyperparameters;
  PlatformSettings platform;  // what the platform's own hyperparameters say
  DistributionGroups distribution;  // the toolkit's distribution instance groups (SM_DISTRIBUTION_INSTANCE_GROUPS)
  InputDataConfig input;
  OutputLocations outputs;  // checkpoints and TensorBoard files
  HostResources resources;
  Device device = Device::cpu;  // the `device` hyperparameter resolved by this host's GPUs
  Precision precision = Precision::float32;  // precision_dtype, else by the device
  int ranks_per_host = 1;
  // Train's own training: mini_batch_size split over the host's ranks, and fusion_threshold_mb in bytes.
  int batch_per_rank = 0;
  size_t bucket_bytes = 0;
  // TRAIN_RANKS_SHARE_GPUS=1 (a check, not a way to train): more ranks than GPUs on a host are allowed, and
  // each rank looks to NCCL like a host of its own (runtime/rank_main.cpp), so that two ranks on one GPU
  // train over NCCL's socket transport, as ranks on two hosts without EFA do.
  bool ranks_share_gpus = false;
  // The steps the timeline records (timeline_steps or TRAIN_TIMELINE); none when it is off.
  std::optional<StepRange> timeline;
  std::vector<std::string> warnings;

  int world_size() const { return ranks_per_host * static_cast<int>(cluster.hosts.size()); }
};

// Reads the job description for `paths` and the environment, for the ranks' `workload`. Every problem found
// is reported at once in the thrown ConfigError, one per line.
JobDescription load_job_description(const JobPaths& paths, const EnvironmentMap& environment,
                                    const HostResources& resources, CheckMode mode,
                                    Workload workload = Workload::train_resnet);

// The effective configuration as `train validate` prints it.
nlohmann::json describe_effective_configuration(const JobDescription& job);

}  // namespace train
