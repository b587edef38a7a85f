// The one typed schema of every hyperparameter `train` accepts: type, default, allowed values, help, and the
// field of HyperparameterValues that holds it. Validation, the typed values, `train validate`, `train
// hyperparameters` and docs/hyperparameters.md's table all come from it.
#pragma once

#include "job/hyperparameter_values.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace train {

// The most ranks one host runs (processes_per_host's maximum); an AWS Batch child that registers more
// slots than this is refused.
inline constexpr int max_processes_per_host = 1024;
// num_classes' bounds: what a classifier needs at least, and the most classes a model may have (the
// training data's labels are held to them when the data decides the classes).
inline constexpr int fewest_classes = 2;
inline constexpr int most_classes = 1000000;

enum class HyperparameterType {
  integer,        // whole number within [minimum, maximum], optionally one of `choices`
  real,           // finite number within the bounds
  boolean,        // true/false (any letter case)
  choice,         // one of `choices`
  text,           // free text
  mpi_arguments,  // text split like a shell command line (quotes, backslashes)
  integer_list,   // "30,60,80": positive, strictly increasing integers
  image_shape,    // "3,224,224": channels,height,width
  step_range,     // "11-20": the first and last of a range of steps (job/step_range.h)
};

// A value as its row's check yields it, before it is stored in its field.
using HyperparameterValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

// Where a row's checked value goes in HyperparameterValues, and how that field reads back for the effective
// configuration (null when it is empty).
struct HyperparameterField {
  void (*store)(HyperparameterValues& values, const HyperparameterValue& value) = nullptr;
  nlohmann::json (*show)(const HyperparameterValues& values) = nullptr;
};

struct HyperparameterSpec {
  std::string_view name;
  HyperparameterType type;
  HyperparameterField field;
  // The default as the user would write it; nullopt when it depends on the job (shown as `default_note`).
  std::optional<std::string_view> default_value;
  std::string_view default_note;  // for the table when default_value is nullopt, e.g. "from the data"
  std::vector<std::string_view> choices;
  double minimum = std::numeric_limits<double>::lowest();
  double maximum = std::numeric_limits<double>::max();
  bool minimum_exclusive = false;
  bool maximum_exclusive = false;
  std::string_view help;
  // Read by the launcher (how many ranks, how mpirun runs): honoured for `train -- CMD` too, where the
  // rest of the schema (train's own training) does not apply.
  bool launcher = false;
};

// Every hyperparameter, in the order of docs/hyperparameters.md's table.
const std::vector<HyperparameterSpec>& hyperparameter_schema();

// nullptr when `name` is not in the schema.
const HyperparameterSpec* find_hyperparameter(std::string_view name);

// The platform's names that mean one of ours (SageMaker's MPI settings).
struct HyperparameterAlias {
  std::string_view alias;
  std::string_view name;
};
const std::vector<HyperparameterAlias>& hyperparameter_aliases();

// "a positive integer", "a number in (0, 1]", "one of sgd, nag, lars": what a value must be.
std::string describe_expected(const HyperparameterSpec& spec);

// docs/hyperparameters.md's table, as Markdown, generated from the schema.
std::string hyperparameter_table_markdown();

}  // namespace train
