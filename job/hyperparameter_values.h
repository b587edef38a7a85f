// Every hyperparameter of the schema as a typed field, named as the schema names it: what the job gave,
// else the schema's default. Each schema row says which field it fills (job/hyperparameter_schema.cpp), so
// a value is parsed, checked and typed once, where hyperparameters.json is read; everything after reads a
// field (the sagemaker-training toolkit's Environment: typed once, read as an attribute). A field with no
// default in the schema is optional: empty until the job sets it. The defaults live in the schema alone,
// so a struct made here without the parser holds zeros.
#pragma once

#include "job/step_range.h"
#include "job/training_choices.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace train {

// image_shape: channels,height,width of the network input (3 channels).
struct ImageShape {
  int channels = 0, height = 0, width = 0;
  friend bool operator==(const ImageShape&, const ImageShape&) = default;
};

struct HyperparameterValues {
  int num_layers = 0;                          // the ResNet depth
  ImageShape image_shape;
  std::optional<int> num_classes;              // empty: from the data
  std::optional<int64_t> num_training_samples; // empty: from the data (Pipe mode needs it)
  int mini_batch_size = 0;                     // per host, split over the host's ranks
  int64_t epochs = 0;
  double learning_rate = 0;                    // for a global batch of 256
  LrDecay lr_scheduler = LrDecay::step;
  std::vector<int64_t> lr_scheduler_step;      // epochs
  double lr_scheduler_factor = 0;
  double warmup_epochs = 0;
  Optimizer optimizer = Optimizer::sgd;
  double momentum = 0;
  double weight_decay = 0;
  double label_smoothing = 0;
  Augmentation augmentation_type = Augmentation::none;
  std::optional<Precision> precision_dtype;    // empty: by the device
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t max_steps = 0;                       // 0: no limit
  int64_t checkpoint_frequency = 0;            // epochs; 0: only at the end
  double fusion_threshold_mb = 0;              // MiB
  DataFormat data_format = DataFormat::detect;
  int64_t tfrecord_label_offset = 0;
  bool skip_corrupt = false;
  std::optional<StepRange> timeline_steps;     // empty: off (unless TRAIN_TIMELINE)
  DeviceChoice device = DeviceChoice::automatic;
  // The launcher's: read for a user's command (`train -- CMD`) too.
  std::optional<int> processes_per_host;       // empty: by the host's GPUs
  std::string custom_mpi_options;              // as given; Hyperparameters splits it
};

}  // namespace train
