#include "runtime/training_settings.h"

#include "common/config_error.h"
#include "common/train_variables.h"
#include "job/training_requirements.h"

#include <fmt/format.h>

#include <cmath>

namespace train {

namespace {

// The job description has checked what Pipe mode needs (job/training_requirements.cpp).
void configure_pipe(TrainingSettings& settings, const Channel& channel, const JobDescription& job) {
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

  // What the job description checks (job/training_requirements.cpp) holds here: a training channel unless the
  // data is synthetic, Pipe mode's counts, no Pipe-mode validation channel, at least 2 images per rank.
  const Channel* train_channel = training_channel(job.input);
  if (train_channel != nullptr) {
    settings.train_dir = job.paths.channel(train_channel->name);
    if (train_channel->mode == InputMode::pipe) configure_pipe(settings, *train_channel, job);
  }
  if (const Channel* validation = job.input.find("validation")) {
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
  settings.output_dir = job.paths.output();
  settings.metrics_file = job.paths.output_data() / "metrics.json";
  settings.timeline = job.timeline;
  settings.timeline_dir = job.paths.output_data() / "timeline";
  settings.host = job.cluster.current_host;
  settings.threads = threads_per_rank(job, identity);
  settings.local_rank = identity.local_rank;
  settings.fast_path = read_switch_variable(current_environment(), SwitchVariable::fast_path);
  return settings;
}

kernels::SgdOptions optimizer_options(const TrainingSettings& settings, double learning_rate) {
  kernels::SgdOptions options;
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
