#include "job/hyperparameter_schema.h"

#include "job/step_range.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <type_traits>

namespace train {

namespace {

using T = HyperparameterType;
using V = HyperparameterValues;
constexpr double unbounded = std::numeric_limits<double>::max();
// The largest integer every double-typed bound can still represent exactly.
constexpr double largest_integer = 9007199254740992.0;  // 2^53

template <typename Field>
constexpr bool is_optional = false;
template <typename Inner>
constexpr bool is_optional<std::optional<Inner>> = true;

// What a field that holds no choice has for its table of names.
constexpr int no_names = 0;

// A checked value into its field's type (a choice by its table of names: job/training_choices.h). The row's
// check has held the value to the field's range (an integer to its bounds, a choice to its names, a shape to
// three numbers), so nothing here can lose or refuse anything.
template <typename Field, typename Names>
void assign(Field& field, const HyperparameterValue& value, const Names& names) {
  if constexpr (is_optional<Field>) {
    typename Field::value_type inner{};
    assign(inner, value, names);
    field = inner;
  } else if constexpr (std::is_same_v<Field, bool>) {
    field = std::get<bool>(value);
  } else if constexpr (std::is_integral_v<Field>) {
    field = static_cast<Field>(std::get<int64_t>(value));
  } else if constexpr (std::is_same_v<Field, double>) {
    field = std::get<double>(value);
  } else if constexpr (std::is_enum_v<Field>) {
    const auto choice = value_named(names, std::get<std::string>(value));
    if (!choice) throw std::logic_error("a choice of the schema has no value: " + std::get<std::string>(value));
    field = *choice;
  } else if constexpr (std::is_same_v<Field, ImageShape>) {
    const auto& numbers = std::get<std::vector<int64_t>>(value);
    field = ImageShape{static_cast<int>(numbers.at(0)), static_cast<int>(numbers.at(1)),
                       static_cast<int>(numbers.at(2))};
  } else if constexpr (std::is_same_v<Field, StepRange>) {
    const auto& numbers = std::get<std::vector<int64_t>>(value);
    field = StepRange{numbers.at(0), numbers.at(1)};
  } else {
    field = std::get<Field>(value);  // text, integer lists
  }
}

// A field as the effective configuration shows it: as the job would write it.
template <typename Field, typename Names>
nlohmann::json shown(const Field& field, const Names& names) {
  if constexpr (is_optional<Field>) {
    return field ? shown(*field, names) : nlohmann::json(nullptr);
  } else if constexpr (std::is_enum_v<Field>) {
    return name_of(names, field);
  } else if constexpr (std::is_same_v<Field, ImageShape>) {
    return nlohmann::json::array({field.channels, field.height, field.width});
  } else if constexpr (std::is_same_v<Field, StepRange>) {
    return nlohmann::json::array({field.first, field.last});
  } else {
    return field;
  }
}

// The row's field: `member` of HyperparameterValues, and for a choice its table of names.
template <auto member, const auto& names = no_names>
constexpr HyperparameterField bound = {
    [](HyperparameterValues& values, const HyperparameterValue& value) { assign(values.*member, value, names); },
    [](const HyperparameterValues& values) { return shown(values.*member, names); }};

// A choice's names, as the schema offers them.
template <typename Choice, size_t N>
std::vector<std::string_view> names_of(const EnumName<Choice> (&table)[N]) {
  std::vector<std::string_view> names;
  for (const auto& entry : table) names.emplace_back(entry.name);
  return names;
}

std::vector<HyperparameterSpec> build_schema() {
  return {
      {.name = "num_layers", .type = T::integer, .field = bound<&V::num_layers>, .default_value = "50",
       .choices = {"18", "34", "50", "101", "152"},
       .help = "ResNet depth"},
      {.name = "image_shape", .type = T::image_shape, .field = bound<&V::image_shape>, .default_value = "3,224,224",
       .help = "channels,height,width of the network input (3 channels; height and width 16-4096)"},
      {.name = "num_classes", .type = T::integer, .field = bound<&V::num_classes>, .default_note = "from the data",
       .minimum = fewest_classes, .maximum = most_classes, .help = "number of classes; the data's labels must fit"},
      {.name = "num_training_samples", .type = T::integer, .field = bound<&V::num_training_samples>,
       .default_note = "from the data; required in Pipe mode", .minimum = 1, .maximum = largest_integer,
       .help = "training records per epoch across the job; Pipe mode needs it for the learning-rate schedule (the "
               "data is a stream); in File mode a different count is reported and the data's count is used"},
      {.name = "mini_batch_size", .type = T::integer, .field = bound<&V::mini_batch_size>, .default_value = "256",
       .minimum = 1, .maximum = 1048576, .help = "images per step per host, split evenly over the host's ranks"},
      {.name = "epochs", .type = T::integer, .field = bound<&V::epochs>, .default_value = "30", .minimum = 1,
       .maximum = largest_integer, .help = "passes over the training data"},
      {.name = "learning_rate", .type = T::real, .field = bound<&V::learning_rate>, .default_value = "0.1",
       .minimum = 0, .maximum = 100, .minimum_exclusive = true, .help = "peak learning rate (after warm-up)"},
      {.name = "lr_scheduler", .type = T::choice, .field = bound<&V::lr_scheduler, lr_decay_names>,
       .default_value = "cosine", .choices = names_of(lr_decay_names), .help = "learning-rate decay after warm-up"},
      {.name = "lr_scheduler_step", .type = T::integer_list, .field = bound<&V::lr_scheduler_step>,
       .default_value = "30,60,80", .help = "epochs at which `step` multiplies the rate by `lr_scheduler_factor`"},
      {.name = "lr_scheduler_factor", .type = T::real, .field = bound<&V::lr_scheduler_factor>, .default_value = "0.1",
       .minimum = 0, .maximum = 1, .minimum_exclusive = true, .help = "multiplier applied at each `step` epoch"},
      {.name = "warmup_epochs", .type = T::real, .field = bound<&V::warmup_epochs>, .default_value = "0", .minimum = 0,
       .maximum = 1000000, .help = "epochs of linear warm-up from 0 to `learning_rate`"},
      {.name = "optimizer", .type = T::choice, .field = bound<&V::optimizer, optimizer_names>,
       .default_value = "sgd", .choices = names_of(optimizer_names),
       .help = "SGD with momentum, Nesterov momentum, or LARS"},
      {.name = "momentum", .type = T::real, .field = bound<&V::momentum>, .default_value = "0.9", .minimum = 0,
       .maximum = 1, .maximum_exclusive = true, .help = "momentum of the optimizer"},
      {.name = "weight_decay", .type = T::real, .field = bound<&V::weight_decay>, .default_value = "0.0001",
       .minimum = 0, .maximum = 1, .help = "L2 weight decay; not applied to batch-norm and bias parameters"},
      {.name = "label_smoothing", .type = T::real, .field = bound<&V::label_smoothing>, .default_value = "0",
       .minimum = 0, .maximum = 1, .maximum_exclusive = true, .help = "label smoothing of the cross-entropy loss"},
      {.name = "augmentation_type", .type = T::choice, .field = bound<&V::augmentation_type, augmentation_names>,
       .default_value = "crop", .choices = names_of(augmentation_names),
       .help = "`none`: resize and centre-crop; `crop`: random resized crop and flip; `crop_color`: also colour "
               "jitter"},
      {.name = "precision_dtype", .type = T::choice, .field = bound<&V::precision_dtype, precision_names>,
       .default_note = "bfloat16 on GPU, float32 on CPU", .choices = names_of(precision_names),
       .help = "arithmetic precision of training"},
      {.name = "shuffle", .type = T::boolean, .field = bound<&V::shuffle>, .default_value = "true",
       .help = "shuffle the data every epoch (seeded)"},
      {.name = "seed", .type = T::integer, .field = bound<&V::seed>, .default_value = "0", .minimum = 0,
       .maximum = 4294967295.0, .help = "all randomness derives from it"},
      {.name = "max_steps", .type = T::integer, .field = bound<&V::max_steps>, .default_value = "0", .minimum = 0,
       .maximum = largest_integer, .help = "stop after this many steps; 0 means no limit"},
      {.name = "checkpoint_frequency", .type = T::integer, .field = bound<&V::checkpoint_frequency>,
       .default_value = "1", .minimum = 0, .maximum = 1000000,
       .help = "write a checkpoint every this many epochs (0: only at the end); also on SIGTERM"},
      {.name = "fusion_threshold_mb", .type = T::real, .field = bound<&V::fusion_threshold_mb>, .default_value = "25",
       .minimum = 0, .maximum = 4096, .minimum_exclusive = true,
       .help = "gradient bucket size in MiB for the fused allreduce"},
      {.name = "data_format", .type = T::choice, .field = bound<&V::data_format, data_format_names>,
       .default_value = "auto", .choices = names_of(data_format_names),
       .help = "`auto`: detected per channel (see Data formats); the others force a format; `synthetic`: random "
               "images, no channel needed (benchmarks)"},
      {.name = "tfrecord_label_offset", .type = T::integer, .field = bound<&V::tfrecord_label_offset>,
       .default_value = "1", .minimum = 0, .maximum = 1000000,
       .help = "subtracted from TFRecord `image/class/label` (1 for the usual 1-based ImageNet shards; 0 for 0-based "
               "labels)"},
      {.name = "skip_corrupt", .type = T::boolean, .field = bound<&V::skip_corrupt>, .default_value = "false",
       .help = "skip corrupt records and undecodable images (counted, reported every epoch) instead of failing"},
      {.name = "timeline_steps", .type = T::step_range, .field = bound<&V::timeline_steps>, .default_note = "off",
       .help = "record these steps of every rank as a Chrome trace (`output/data/timeline/`, opened by Perfetto) and "
               "print each rank's share of waiting for data, computing and exposed communication; also "
               "`TRAIN_TIMELINE`"},
      {.name = "device", .type = T::choice, .field = bound<&V::device, device_choice_names>, .default_value = "auto",
       .choices = names_of(device_choice_names), .help = "`auto` uses the GPUs when there are any"},
      {.name = "processes_per_host", .type = T::integer, .field = bound<&V::processes_per_host>,
       .default_note = "one per GPU; 1 on a CPU host", .minimum = 1, .maximum = max_processes_per_host,
       .help = "ranks per host; `sagemaker_mpi_num_of_processes_per_host` is an alias", .launcher = true},
      {.name = "custom_mpi_options", .type = T::mpi_arguments, .field = bound<&V::custom_mpi_options>,
       .default_value = "",
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
