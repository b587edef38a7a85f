// hyperparameters.json decoded as the SageMaker toolkit does, then checked against the schema.
#pragma once

#include "job/hyperparameter_schema.h"
#include "job/hyperparameter_values.h"
#include "job/mpi_options.h"
#include "job/python_value.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace train {

// What the ranks run: train's own ResNet training, whose schema every key must fit; or a user's command
// (`train -- CMD`), whose hyperparameters are its own: only the launcher's keys are read and checked, and
// every other key goes to the command as the toolkit passes it.
enum class Workload { train_resnet, user_command };

// The hyperparameters of a job, read once: every schema key as a typed field (HyperparameterValues, each
// filled by its schema row: what the job gave, else the default), and the file as the platform and a user's
// program see it.
class Hyperparameters : public HyperparameterValues {
 public:
  // True when the job set it (directly or through an alias), false when it is a default.
  bool given(std::string_view name) const { return given_.count(std::string(name)) != 0; }

  // Every key of the file, sagemaker_* included, with its value JSON-decoded as the toolkit does (the
  // platform's keys, the effective configuration and the argument-size check read it; SM_HPS and SM_HP_*
  // come from toolkit_values()).
  const nlohmann::json& decoded() const { return decoded_; }
  // The same keys as the toolkit holds them (Python's json.load of the file, then json.loads of each string
  // value): a dict in the file's order, integers of any size, NaN and Infinity. What reaches a user's
  // program (SM_HPS, SM_HP_*, the arguments) is written from these.
  const PythonValue& toolkit_values() const { return toolkit_values_; }

  // The effective settings, every schema key with its value or default, as a JSON object.
  nlohmann::json effective() const;

  // custom_mpi_options split into words, as the user wrote them.
  std::vector<std::string> custom_mpi_words() const;
  // custom_mpi_options as the toolkit reads them: NCCL_DEBUG taken out, the rest for mpirun.
  CustomMpiOptions mpi_options() const;

 private:
  friend Hyperparameters parse_hyperparameters(const nlohmann::json& document, const std::string& source,
                                               Workload workload, const PythonValue* toolkit_document);
  Workload workload_ = Workload::train_resnet;  // which schema keys it read: all, or the launcher's
  std::set<std::string> given_;
  nlohmann::json decoded_ = nlohmann::json::object();
  PythonValue toolkit_values_{PythonValue::Kind::dict};
};

// Every problem in the document is reported at once, one per line of the thrown ConfigError. Platform keys
// (job/platform_keys.h) are kept in decoded() and left to the platform settings. `toolkit_document` is the
// file as Python's json.load reads it, when the caller has the file's text (numbers written in the file
// itself beyond 64 bits stay exact); without it, the toolkit's values are made from `document`.
Hyperparameters parse_hyperparameters(const nlohmann::json& document, const std::string& source,
                                      Workload workload = Workload::train_resnet,
                                      const PythonValue* toolkit_document = nullptr);

// A missing file means "all defaults" (local runs, AWS Batch).
Hyperparameters read_hyperparameters(const std::filesystem::path& path, Workload workload = Workload::train_resnet);

// A key as a message shows it between backticks: JSON escapes for control characters (a NUL as \u0000), cut
// to a readable length.
std::string hyperparameter_key_for_message(const std::string& key);

// The toolkit's decoding of one value: a string that parses as JSON becomes that JSON; anything else stays.
nlohmann::json decode_hyperparameter_value(const nlohmann::json& raw);

}  // namespace train
