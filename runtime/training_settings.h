// What the trainer and its engine need: the job's typed values (its hyperparameters and what the job
// description worked out from them: job/job_description.h) under the names the rank uses, and this rank's
// place in the job: its share of the data, its threads, its device. Nothing here parses or derives a
// hyperparameter; every choice arrived typed (job/training_choices.h).
#pragma once

#include "job/job_description.h"
#include "job/rank_environment.h"
#include "job/step_range.h"
#include "job/training_choices.h"
#include "kernels/ops.h"
#include "runtime/learning_rate.h"
#include "runtime/model/resnet_plan.h"

#include <filesystem>
#include <optional>
#include <string>

namespace train {

struct TrainingSettings {
  // The job's values, each copied from its typed field (a settings made by hand, as the benchmarks make
  // one, starts from these defaults instead).
  int depth = 50;
  int height = 224, width = 224;
  std::optional<int> num_classes;  // from the hyperparameter; else from the data
  int batch_per_rank = 32;
  int64_t global_batch = 256;
  int64_t epochs = 30;
  int64_t max_steps = 0;           // 0: no limit
  double learning_rate = 0.1;      // as given (for a global batch of 256)
  LrDecay lr_scheduler = LrDecay::cosine;
  std::vector<int64_t> lr_step_epochs;
  double lr_step_factor = 0.1;
  double warmup_epochs = 0;
  Optimizer optimizer = Optimizer::sgd;
  double momentum = 0.9, weight_decay = 1e-4, label_smoothing = 0;
  Augmentation augmentation = Augmentation::crop;
  Device device = Device::cpu;
  Precision precision = Precision::float32;
  bool shuffle = true;
  uint64_t seed = 0;
  int64_t checkpoint_frequency = 1;
  size_t bucket_bytes = 25u << 20;
  DataFormat data_format = DataFormat::detect;
  int64_t tfrecord_label_offset = 1;  // subtracted from TFRecord labels
  bool skip_corrupt = false;          // skip (and count) corrupt records instead of failing

  // Data: the training channel's directory, the validation channel's (if any), the weights channel's.
  std::filesystem::path train_dir;
  std::optional<std::filesystem::path> validation_dir;
  // The built-in algorithm's image-list channels (train_lst, validation_lst): .lst files for the images
  // in train_dir / validation_dir.
  std::optional<std::filesystem::path> train_list_dir, validation_list_dir;
  std::optional<std::filesystem::path> weights_dir;
  // Ranks sharing one copy of the data: all ranks (FullyReplicated) or this host's (ShardedByS3Key).
  int data_rank = 0, data_ranks = 1;
  bool sharded = false;  // ShardedByS3Key: every host holds its own part of the training data
  std::optional<int64_t> num_training_samples;  // the hyperparameter: records per epoch across the job

  // Pipe mode: the training channel streams through FIFOs <pipe_fifo_prefix>_0, _1, ... one per epoch.
  bool pipe = false;
  std::string pipe_channel;
  std::filesystem::path pipe_fifo_prefix;
  bool pipe_unwrap_recordio = false;  // RecordWrapperType=RecordIO
  std::filesystem::path model_dir, checkpoint_dir;
  std::filesystem::path tensorboard_dir;  // TensorBoard event files (rank 0)
  std::filesystem::path output_dir;       // output/: what train writes below it is never written through a link
  std::filesystem::path metrics_file;     // metrics.json (rank 0)
  // timeline_steps or TRAIN_TIMELINE: the steps every rank records as a trace into timeline_dir.
  std::optional<StepRange> timeline;
  std::filesystem::path timeline_dir;
  std::string host;                       // this rank's host, for the per-rank timing lines
  // The data loader's decoding threads: this rank's share of the host's cores, whatever OMP_NUM_THREADS says
  // (that is OpenMP's compute threads; torchrun's habit of 1 must not starve a GPU rank's JPEG decoding).
  int loader_threads = 1;
  int local_rank = 0;  // this rank's GPU, on a CUDA device
  // TRAIN_SHARED_GRADIENT_BUFFERS=1 (formerly TRAIN_FAST_PATH): gradient buffers shared by lifetime,
  // checked against the reference path it leaves selectable; off by default until a GPU run has shown it
  // right and faster.
  bool shared_gradient_buffers = false;
  model::GradientMemory gradient_memory() const {
    return shared_gradient_buffers ? model::GradientMemory::shared_by_lifetime : model::GradientMemory::per_activation;
  }
};

// The settings of rank `identity` of `job` (loaded by load_job_description, which has checked all the job
// asks: job/training_requirements.h).
TrainingSettings derive_training_settings(const JobDescription& job, const RankIdentity& identity);

// The optimizer's settings for one step at `learning_rate` (both engines' SGD, momentum, Nesterov, LARS).
kernels::SgdOptions optimizer_options(const TrainingSettings& settings, double learning_rate);

// The learning-rate schedule once the data's size is known.
LearningRateSchedule make_schedule(const TrainingSettings& settings, int64_t steps_per_epoch, int64_t total_steps);

}  // namespace train
