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

}  // namespace

TrainingSettings derive_training_settings(const JobDescription& job, const RankIdentity& identity) {
  const auto& hp = job.hyperparameters;
  TrainingSettings settings;
  settings.depth = hp.num_layers;
  settings.height = hp.image_shape.height;
  settings.width = hp.image_shape.width;
  settings.num_classes = hp.num_classes;
  settings.batch_per_rank = job.batch_per_rank;
  settings.global_batch = int64_t{settings.batch_per_rank} * identity.size;
  settings.epochs = hp.epochs;
  settings.max_steps = hp.max_steps;
  settings.learning_rate = hp.learning_rate;
  settings.lr_scheduler = hp.lr_scheduler;
  settings.lr_step_epochs = hp.lr_scheduler_step;
  settings.lr_step_factor = hp.lr_scheduler_factor;
  settings.warmup_epochs = hp.warmup_epochs;
  settings.optimizer = hp.optimizer;
  settings.momentum = hp.momentum;
  settings.weight_decay = hp.weight_decay;
  settings.label_smoothing = hp.label_smoothing;
  settings.augmentation = hp.augmentation_type;
  settings.device = job.device;
  settings.precision = job.precision;
  settings.shuffle = hp.shuffle;
  settings.seed = hp.seed;
  settings.checkpoint_frequency = hp.checkpoint_frequency;
  settings.bucket_bytes = job.bucket_bytes;
  settings.data_format = hp.data_format;
  settings.tfrecord_label_offset = hp.tfrecord_label_offset;
  settings.skip_corrupt = hp.skip_corrupt;
  settings.num_training_samples = hp.num_training_samples;

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
  settings.loader_threads = cores_per_rank(job, identity);
  settings.local_rank = identity.local_rank;
  settings.shared_gradient_buffers = read_flag_variable(current_environment(), FlagVariable::shared_gradient_buffers);
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
