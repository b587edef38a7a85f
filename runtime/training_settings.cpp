#include "runtime/training_settings.h"

#include "common/config_error.h"
#include "common/environment_map.h"

#include <fmt/format.h>

#include <cmath>

namespace train {

namespace {

// A Pipe-mode training channel is a stream: how many records an epoch holds and which classes they use are
// known only at its end, so the schedule and the model need both numbers up front, as SageMaker's built-in
// image classification algorithm asks for them.
void configure_pipe(TrainingSettings& settings, const Channel& channel, const JobDescription& job) {
  using data::DataFormat;
  if (settings.data_format != DataFormat::detect && settings.data_format != DataFormat::tfrecord &&
      settings.data_format != DataFormat::recordio) {
    throw ConfigError(fmt::format("channel \"{}\" uses Pipe mode, which streams TFRecord or RecordIO objects, but "
                                  "hyperparameter data_format is \"{}\": use auto, tfrecord or recordio, or File mode",
                                  channel.name, data::data_format_name(settings.data_format)));
  }
  std::vector<std::string> missing;
  if (!settings.num_training_samples) missing.push_back("num_training_samples (records per epoch across the job)");
  if (!settings.num_classes) missing.push_back("num_classes");
  if (!missing.empty()) {
    throw ConfigError(fmt::format("channel \"{}\" uses Pipe mode, where the data is a stream that train sees only "
                                  "as it trains; set the hyperparameter{} {} (as for SageMaker's built-in image "
                                  "classification algorithm)",
                                  channel.name, missing.size() > 1 ? "s" : "", fmt::join(missing, " and ")));
  }
  settings.pipe = true;
  settings.pipe_channel = channel.name;
  settings.pipe_fifo_prefix = job.paths.channel(channel.name);
  settings.pipe_unwrap_recordio = channel.record_wrapper == RecordWrapper::recordio;
}

template <typename Enum, size_t N>
Enum choose(const std::string& text, const char* hyperparameter, const std::pair<const char*, Enum> (&choices)[N]) {
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
  }
  // The schema has refused anything else already; reaching here is a schema and code out of step.
  throw ConfigError(fmt::format("hyperparameter `{}`: \"{}\" is not a choice this build of train knows", hyperparameter, text));
}

constexpr std::pair<const char*, Optimizer> optimizers[] = {{"sgd", Optimizer::sgd}, {"nag", Optimizer::nag}, {"lars", Optimizer::lars}};
constexpr std::pair<const char*, LrDecay> decays[] = {{"step", LrDecay::step}, {"poly", LrDecay::poly}, {"cosine", LrDecay::cosine}};
constexpr std::pair<const char*, Precision> precisions[] = {{"float32", Precision::float32}, {"bfloat16", Precision::bfloat16}};

}  // namespace

const char* optimizer_name(Optimizer optimizer) {
  for (const auto& [name, value] : optimizers) {
    if (value == optimizer) return name;
  }
  return "?";
}

const char* precision_name(Precision precision) {
  for (const auto& [name, value] : precisions) {
    if (value == precision) return name;
  }
  return "?";
}

const char* lr_decay_name(LrDecay decay) {
  for (const auto& [name, value] : decays) {
    if (value == decay) return name;
  }
  return "?";
}

bool fast_path_from_environment() {
  auto fast = lookup(current_environment(), "TRAIN_FAST_PATH");
  if (!fast || fast->empty()) return false;
  if (*fast != "0" && *fast != "1") {
    throw ConfigError(fmt::format("environment variable TRAIN_FAST_PATH: expected 0 or 1, got \"{}\"; unset it for "
                                  "the reference path", *fast));
  }
  return *fast == "1";
}

std::optional<StepRange> timeline_steps(const Hyperparameters& hyperparameters, const EnvironmentMap& environment) {
  std::optional<StepRange> from_hyperparameter;
  if (hyperparameters.has("timeline_steps")) {
    const auto& range = hyperparameters.integers("timeline_steps");
    from_hyperparameter = StepRange{range.at(0), range.at(1)};
  }
  const auto variable = lookup(environment, "TRAIN_TIMELINE");
  if (!variable || variable->empty()) return from_hyperparameter;
  const auto from_variable = parse_step_range(*variable);
  if (!from_variable) {
    throw ConfigError(fmt::format("environment variable TRAIN_TIMELINE: expected {}, got \"{}\"",
                                  describe_step_range_format(), *variable));
  }
  if (from_hyperparameter && !(*from_hyperparameter == *from_variable)) {
    throw ConfigError(fmt::format("hyperparameter `timeline_steps` ({}-{}) and environment variable TRAIN_TIMELINE "
                                  "(\"{}\") ask for different steps; set only one",
                                  from_hyperparameter->first, from_hyperparameter->last, *variable));
  }
  return from_variable;
}

TrainingSettings derive_training_settings(const JobDescription& job, const RankIdentity& identity) {
  const auto& hp = job.hyperparameters;
  TrainingSettings settings;
  settings.depth = static_cast<int>(hp.integer("num_layers"));
  const auto& shape = hp.integers("image_shape");
  settings.height = static_cast<int>(shape[1]);
  settings.width = static_cast<int>(shape[2]);
  if (auto classes = hp.optional_integer("num_classes")) settings.num_classes = static_cast<int>(*classes);
  // mini_batch_size is per host and split over the host's ranks, as SageMaker's built-in algorithm.
  settings.batch_per_rank = static_cast<int>(hp.integer("mini_batch_size") / job.ranks_per_host);
  settings.global_batch = int64_t{settings.batch_per_rank} * identity.size;
  if (settings.batch_per_rank < 2) {
    throw ConfigError(fmt::format("hyperparameter `mini_batch_size` gives each of the {} ranks per host {} image; "
                                  "batch norm needs at least 2 per rank, so use at least {}",
                                  job.ranks_per_host, settings.batch_per_rank, 2 * job.ranks_per_host));
  }
  settings.epochs = hp.integer("epochs");
  settings.max_steps = hp.integer("max_steps");
  settings.learning_rate = hp.real("learning_rate");
  settings.lr_scheduler = choose(hp.text("lr_scheduler"), "lr_scheduler", decays);
  settings.lr_step_epochs = hp.integers("lr_scheduler_step");
  settings.lr_step_factor = hp.real("lr_scheduler_factor");
  settings.warmup_epochs = hp.real("warmup_epochs");
  settings.optimizer = choose(hp.text("optimizer"), "optimizer", optimizers);
  settings.momentum = hp.real("momentum");
  settings.weight_decay = hp.real("weight_decay");
  settings.label_smoothing = hp.real("label_smoothing");
  settings.augmentation = data::parse_augmentation(hp.text("augmentation_type"));
  settings.device = job.device == "cuda" ? Device::cuda : Device::cpu;
  settings.precision = choose(job.precision, "precision_dtype", precisions);
  settings.shuffle = hp.boolean("shuffle");
  settings.seed = static_cast<uint64_t>(hp.integer("seed"));
  settings.checkpoint_frequency = hp.integer("checkpoint_frequency");
  settings.bucket_bytes = static_cast<size_t>(hp.real("fusion_threshold_mb") * 1024.0 * 1024.0);
  if (hp.has("data_format")) settings.data_format = data::parse_data_format(hp.text("data_format"));
  if (hp.has("tfrecord_label_offset")) settings.tfrecord_label_offset = hp.integer("tfrecord_label_offset");
  if (hp.has("skip_corrupt")) settings.skip_corrupt = hp.boolean("skip_corrupt");
  if (auto samples = hp.optional_integer("num_training_samples")) settings.num_training_samples = *samples;

  const Channel* train_channel = job.input.find("train");
  if (train_channel == nullptr) train_channel = job.input.find("training");
  if (train_channel != nullptr) {
    settings.train_dir = job.paths.channel(train_channel->name);
    if (train_channel->mode == InputMode::pipe) configure_pipe(settings, *train_channel, job);
  } else if (settings.data_format != data::DataFormat::synthetic) {
    throw ConfigError("the job has no training data: expected a channel named \"train\" (or \"training\") in "
                      "inputdataconfig.json, or hyperparameter data_format=synthetic for a benchmark");
  }
  if (const Channel* validation = job.input.find("validation")) {
    if (validation->mode == InputMode::pipe) {
      throw ConfigError("channel \"validation\" uses Pipe mode; train reads validation data in File or FastFile mode "
                        "only (it is read whole every epoch): set its TrainingInputMode to File or FastFile");
    }
    settings.validation_dir = job.paths.channel(validation->name);
  }
  if (const Channel* list = job.input.find("train_lst")) settings.train_list_dir = job.paths.channel(list->name);
  if (const Channel* list = job.input.find("validation_lst")) {
    settings.validation_list_dir = job.paths.channel(list->name);
  }
  if (job.input.find("model") != nullptr) settings.weights_dir = job.paths.channel("model");
  const bool sharded = train_channel != nullptr && train_channel->distribution == S3Distribution::sharded_by_s3_key;
  settings.sharded = sharded;
  settings.data_rank = sharded ? identity.local_rank : identity.rank;
  settings.data_ranks = sharded ? identity.local_size : identity.size;
  settings.model_dir = job.paths.model();
  settings.checkpoint_dir = job.outputs.checkpoints;  // checkpointconfig.json may move it
  settings.tensorboard_dir = job.outputs.tensorboard;
  settings.metrics_file = job.paths.output_data() / "metrics.json";
  settings.timeline = timeline_steps(hp, current_environment());
  settings.timeline_dir = job.paths.output_data() / "timeline";
  settings.host = job.cluster.current_host;
  settings.threads = threads_per_rank(job, identity);
  settings.local_rank = identity.local_rank;
  settings.fast_path = fast_path_from_environment();
  return settings;
}

ops::SgdOptions optimizer_options(const TrainingSettings& settings, double learning_rate) {
  ops::SgdOptions options;
  options.lr = learning_rate;
  options.momentum = settings.momentum;
  options.weight_decay = settings.weight_decay;
  options.nesterov = settings.optimizer == Optimizer::nag;
  options.lars = settings.optimizer == Optimizer::lars;
  return options;
}

LearningRateSchedule make_schedule(const TrainingSettings& settings, int64_t steps_per_epoch, int64_t total_steps) {
  LearningRateSchedule schedule;
  schedule.peak = scaled_peak_learning_rate(settings.learning_rate, settings.global_batch);
  schedule.decay = settings.lr_scheduler;
  schedule.steps_per_epoch = steps_per_epoch;
  schedule.total_steps = total_steps;
  schedule.warmup_steps = static_cast<int64_t>(std::llround(settings.warmup_epochs * static_cast<double>(steps_per_epoch)));
  schedule.step_epochs = settings.lr_step_epochs;
  schedule.step_factor = settings.lr_step_factor;
  return schedule;
}

}  // namespace train
