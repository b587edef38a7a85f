#include "job/platform_keys.h"

#include "common/json_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace train {

namespace {

// The toolkit's SAGEMAKER_HYPERPARAMETERS (params.py): the keys it consumes itself. Two of them do not
// start with `sagemaker_`.
constexpr std::string_view toolkit_keys[] = {
    "sagemaker_program",   "sagemaker_submit_directory", "sagemaker_enable_cloudwatch_metrics",
    "sagemaker_region",    "sagemaker_container_log_level", "sagemaker_job_name",
    "default_user_module_name", "_tuning_objective_metric", "sagemaker_s3_output"};

std::optional<int64_t> positive_integer(const nlohmann::json& value) {
  if (value.is_number_unsigned() || value.is_number_integer()) {
    auto number = value.get<int64_t>();
    return number >= 1 ? std::optional<int64_t>(number) : std::nullopt;
  }
  if (value.is_string()) {  // {"sagemaker_mpi_num_processes": "\"8\""} decodes to the string "8"
    const auto& text = value.get_ref<const std::string&>();
    if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return {};
    auto number = std::stoll(text);
    return number >= 1 ? std::optional<int64_t>(number) : std::nullopt;
  }
  return std::nullopt;
}

std::string text_of(const nlohmann::json& value) {
  if (value.is_null()) return "";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

bool is_toolkit_key(std::string_view key) {
  return std::find(std::begin(toolkit_keys), std::end(toolkit_keys), key) != std::end(toolkit_keys);
}

bool is_platform_key(std::string_view key) { return key.rfind("sagemaker_", 0) == 0 || is_toolkit_key(key); }

PlatformSettings read_platform_settings(const nlohmann::json& decoded, ConfigProblems& problems) {
  PlatformSettings settings;
  if (!decoded.is_object()) return settings;
  if (auto it = decoded.find("sagemaker_mpi_num_processes"); it != decoded.end()) {
    settings.num_processes = positive_integer(*it);
    if (!settings.num_processes) {
      problems.add(fmt::format("hyperparameter `sagemaker_mpi_num_processes`: expected the job's number of ranks, a "
                               "positive integer, got {}",
                               quote_json_for_message(*it)));
    }
  }
  if (auto it = decoded.find("sagemaker_distribution_instance_groups"); it != decoded.end()) {
    std::vector<std::string> groups;
    bool valid = it->is_string() || it->is_array();
    if (it->is_string()) groups.push_back(it->get<std::string>());
    if (it->is_array()) {
      for (const auto& group : *it) {
        if (!group.is_string()) valid = false;
        else groups.push_back(group.get<std::string>());
      }
    }
    if (!valid || groups.empty()) {
      problems.add(fmt::format("hyperparameter `sagemaker_distribution_instance_groups`: expected a list of the "
                               "instance groups that train, such as [\"gpu_group\"], got {}",
                               quote_json_for_message(*it)));
    } else {
      settings.distribution_instance_groups = std::move(groups);
    }
  }
  settings.job_name = text_of(decoded.value("sagemaker_job_name", nlohmann::json()));
  settings.region = text_of(decoded.value("sagemaker_region", nlohmann::json()));
  return settings;
}

}  // namespace train
