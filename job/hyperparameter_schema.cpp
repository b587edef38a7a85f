#include "job/hyperparameter_schema.h"

#include "job/step_range.h"

#include <fmt/format.h>

#include <cmath>

namespace train {

namespace {

using T = HyperparameterType;
constexpr double unbounded = std::numeric_limits<double>::max();
// The largest integer every double-typed bound can still represent exactly.
constexpr double largest_integer = 9007199254740992.0;  // 2^53

std::vector<HyperparameterSpec> build_schema() {
  return {
      {.name = "num_layers", .type = T::integer, .default_value = "50",
       .choices = {"18", "34", "50", "101", "152"},
       .help = "ResNet depth"},
      {.name = "image_shape", .type = T::image_shape, .default_value = "3,224,224",
       .help = "channels,height,width of the network input (3 channels; height and width 16-4096)"},
      {.name = "num_classes", .type = T::integer, .default_note = "from the data", .minimum = 2,
       .maximum = 1000000, .help = "number of classes; the data's labels must fit"},
      {.name = "num_training_samples", .type = T::integer, .default_note = "from the data; required in Pipe mode",
       .minimum = 1, .maximum = largest_integer,
       .help = "training records per epoch across the job; Pipe mode needs it for the learning-rate schedule (the "
               "data is a stream); in File mode a different count is reported and the data's count is used"},
      {.name = "mini_batch_size", .type = T::integer, .default_value = "256", .minimum = 1, .maximum = 1048576,
       .help = "images per step per host, split evenly over the host's ranks"},
      {.name = "epochs", .type = T::integer, .default_value = "30", .minimum = 1, .maximum = largest_integer,
       .help = "passes over the training data"},
      {.name = "learning_rate", .type = T::real, .default_value = "0.1", .minimum = 0, .maximum = 100,
       .minimum_exclusive = true, .help = "peak learning rate (after warm-up)"},
      {.name = "lr_scheduler", .type = T::choice, .default_value = "cosine", .choices = {"step", "poly", "cosine"},
       .help = "learning-rate decay after warm-up"},
      {.name = "lr_scheduler_step", .type = T::integer_list, .default_value = "30,60,80",
       .help = "epochs at which `step` multiplies the rate by `lr_scheduler_factor`"},
      {.name = "lr_scheduler_factor", .type = T::real, .default_value = "0.1", .minimum = 0, .maximum = 1,
       .minimum_exclusive = true, .help = "multiplier applied at each `step` epoch"},
      {.name = "warmup_epochs", .type = T::real, .default_value = "0", .minimum = 0, .maximum = 1000000,
       .help = "epochs of linear warm-up from 0 to `learning_rate`"},
      {.name = "optimizer", .type = T::choice, .default_value = "sgd", .choices = {"sgd", "nag", "lars"},
       .help = "SGD with momentum, Nesterov momentum, or LARS"},
      {.name = "momentum", .type = T::real, .default_value = "0.9", .minimum = 0, .maximum = 1,
       .maximum_exclusive = true, .help = "momentum of the optimizer"},
      {.name = "weight_decay", .type = T::real, .default_value = "0.0001", .minimum = 0, .maximum = 1,
       .help = "L2 weight decay; not applied to batch-norm and bias parameters"},
      {.name = "label_smoothing", .type = T::real, .default_value = "0", .minimum = 0, .maximum = 1,
       .maximum_exclusive = true, .help = "label smoothing of the cross-entropy loss"},
      {.name = "augmentation_type", .type = T::choice, .default_value = "crop",
       .choices = {"none", "crop", "crop_color"},
       .help = "`none`: resize and centre-crop; `crop`: random resized crop and flip; `crop_color`: also colour "
               "jitter"},
      {.name = "precision_dtype", .type = T::choice, .default_note = "bfloat16 on GPU, float32 on CPU",
       .choices = {"float32", "bfloat16"}, .help = "arithmetic precision of training"},
      {.name = "shuffle", .type = T::boolean, .default_value = "true", .help = "shuffle the data every epoch (seeded)"},
      {.name = "seed", .type = T::integer, .default_value = "0", .minimum = 0, .maximum = 4294967295.0,
       .help = "all randomness derives from it"},
      {.name = "max_steps", .type = T::integer, .default_value = "0", .minimum = 0, .maximum = largest_integer,
       .help = "stop after this many steps; 0 means no limit"},
      {.name = "checkpoint_frequency", .type = T::integer, .default_value = "1", .minimum = 0, .maximum = 1000000,
       .help = "write a checkpoint every this many epochs (0: only at the end); also on SIGTERM"},
      {.name = "fusion_threshold_mb", .type = T::real, .default_value = "25", .minimum = 0, .maximum = 4096,
       .minimum_exclusive = true, .help = "gradient bucket size in MiB for the fused allreduce"},
      {.name = "data_format", .type = T::choice, .default_value = "auto",
       .choices = {"auto", "image_folder", "image_list", "tfrecord", "recordio", "synthetic"},
       .help = "`auto`: detected per channel (see Data formats); the others force a format; `synthetic`: random "
               "images, no channel needed (benchmarks)"},
      {.name = "tfrecord_label_offset", .type = T::integer, .default_value = "1", .minimum = 0, .maximum = 1000000,
       .help = "subtracted from TFRecord `image/class/label` (1 for the usual 1-based ImageNet shards; 0 for 0-based "
               "labels)"},
      {.name = "skip_corrupt", .type = T::boolean, .default_value = "false",
       .help = "skip corrupt records and undecodable images (counted, reported every epoch) instead of failing"},
      {.name = "timeline_steps", .type = T::step_range, .default_note = "off",
       .help = "record these steps of every rank as a Chrome trace (`output/data/timeline/`, opened by Perfetto) and "
               "print each rank's share of waiting for data, computing and exposed communication; also "
               "`TRAIN_TIMELINE`"},
      {.name = "device", .type = T::choice, .default_value = "auto", .choices = {"auto", "cuda", "cpu"},
       .help = "`auto` uses the GPUs when there are any"},
      {.name = "processes_per_host", .type = T::integer, .default_note = "one per GPU; 1 on a CPU host",
       .minimum = 1, .maximum = max_processes_per_host,
       .help = "ranks per host; `sagemaker_mpi_num_of_processes_per_host` is an alias", .launcher = true},
      {.name = "custom_mpi_options", .type = T::mpi_arguments, .default_value = "",
       .help = "extra mpirun options, split like a shell line; `--NCCL_DEBUG LEVEL` among them sets NCCL's log level on "
               "every rank (default INFO), as the SageMaker toolkit reads it; `sagemaker_mpi_custom_mpi_options` is an "
               "alias",
       .launcher = true},
  };
}

std::string format_bound(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{}", static_cast<long long>(value));
  return fmt::format("{}", value);
}

std::string type_name(const HyperparameterSpec& spec) {
  switch (spec.type) {
    case T::integer: return "int";
    case T::real: return "float";
    case T::boolean: return "bool";
    case T::choice: return "string";
    case T::text: return "string";
    case T::mpi_arguments: return "string";
    case T::integer_list: return "int list";
    case T::image_shape: return "shape";
    case T::step_range: return "step range";
  }
  return "?";
}

}  // namespace

const std::vector<HyperparameterSpec>& hyperparameter_schema() {
  static const std::vector<HyperparameterSpec> schema = build_schema();
  return schema;
}

const HyperparameterSpec* find_hyperparameter(std::string_view name) {
  for (const auto& spec : hyperparameter_schema()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const std::vector<HyperparameterAlias>& hyperparameter_aliases() {
  static const std::vector<HyperparameterAlias> aliases = {
      {"sagemaker_mpi_num_of_processes_per_host", "processes_per_host"},
      {"sagemaker_mpi_custom_mpi_options", "custom_mpi_options"},
  };
  return aliases;
}

std::string describe_expected(const HyperparameterSpec& spec) {
  auto join_choices = [&] {
    std::string joined;
    for (size_t i = 0; i < spec.choices.size(); ++i) {
      joined += (i == 0 ? "" : (i + 1 == spec.choices.size() ? " or " : ", "));
      joined += spec.choices[i];
    }
    return joined;
  };
  switch (spec.type) {
    case T::integer:
      if (!spec.choices.empty()) return "one of " + join_choices();
      if (spec.maximum >= largest_integer) {
        if (spec.minimum == 1) return "a positive integer";
        if (spec.minimum == 0) return "a non-negative integer";
      }
      return fmt::format("an integer from {} to {}", format_bound(spec.minimum), format_bound(spec.maximum));
    case T::real:
      return fmt::format("a number in {}{}, {}{}", spec.minimum_exclusive ? "(" : "[", format_bound(spec.minimum),
                         format_bound(spec.maximum), spec.maximum_exclusive ? ")" : "]");
    case T::boolean: return "true or false";
    case T::choice: return "one of " + join_choices();
    case T::text: return "a string";
    case T::mpi_arguments: return "mpirun options written like a shell command line";
    case T::integer_list: return "a comma-separated list of increasing positive integers such as \"30,60,80\"";
    case T::image_shape: return "\"3,HEIGHT,WIDTH\" with HEIGHT and WIDTH from 16 to 4096, such as \"3,224,224\"";
    case T::step_range: return describe_step_range_format();
  }
  return "?";
}

std::string hyperparameter_table_markdown() {
  std::string table = "| name | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const auto& spec : hyperparameter_schema()) {
    std::string default_text = spec.default_value ? fmt::format("`{}`", *spec.default_value)
                                                   : std::string(spec.default_note);
    if (spec.default_value && spec.default_value->empty()) default_text = "(empty)";
    std::string allowed = describe_expected(spec);
    table += fmt::format("| `{}` | {} | {} | {} | {} |\n", spec.name, type_name(spec), default_text, allowed,
                         spec.help);
  }
  return table;
}

}  // namespace train
