#include "job/sagemaker_environment.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace train {

std::string encode_environment_value(const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  // nlohmann's objects are ordered maps, so keys come out sorted as with json.dumps(sort_keys=True).
  return value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

namespace {

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}

// The toolkit's sagemaker_* keys that it consumes itself; the others become framework parameters.
bool is_toolkit_parameter(const std::string& key) {
  static const char* const known[] = {"sagemaker_program", "sagemaker_submit_directory",
                                      "sagemaker_enable_cloudwatch_metrics", "sagemaker_container_log_level",
                                      "sagemaker_job_name", "sagemaker_region", "sagemaker_s3_output"};
  return std::find(std::begin(known), std::end(known), key) != std::end(known);
}

std::string python_repr(const nlohmann::json& value);

// Python's str() of a decoded value: strings as they are, the rest as repr() ("True", "[30, 60]").
std::string python_str(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : python_repr(value);
}

// Python's repr() of a decoded JSON value (what str() of a list or dict shows for its items).
std::string python_repr(const nlohmann::json& value) {
  if (value.is_null()) return "None";
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    const char quote = (text.find('\'') != std::string::npos && text.find('"') == std::string::npos) ? '"' : '\'';
    std::string quoted(1, quote);
    for (char c : text) {
      if (c == quote || c == '\\') quoted += {'\\', c};
      else if (c == '\n') quoted += "\\n";
      else if (c == '\r') quoted += "\\r";
      else if (c == '\t') quoted += "\\t";
      else if ((c >= 0 && c < ' ') || c == 0x7f) quoted += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      else quoted += c;
    }
    return quoted + quote;
  }
  if (value.is_array()) {
    std::string joined;
    for (const auto& item : value) joined += (joined.empty() ? "" : ", ") + python_repr(item);
    return "[" + joined + "]";
  }
  if (value.is_object()) {
    std::string joined;
    for (const auto& [key, item] : value.items()) {
      joined += (joined.empty() ? "" : ", ") + python_repr(nlohmann::json(key)) + ": " + python_repr(item);
    }
    return "{" + joined + "}";
  }
  return value.dump();  // numbers: JSON and Python write them alike
}

// The toolkit's command-line form of one hyperparameter value (its _mapping.to_cmd_args): None becomes "",
// a dict "k=v,k2=v2" in key order, anything else Python's str().
std::string command_line_value(const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (value.is_object()) {
    std::string joined;
    for (const auto& [key, item] : value.items()) {
      joined += (joined.empty() ? "" : ",") + key + "=" + python_str(item);
    }
    return joined;
  }
  return python_str(value);
}

}  // namespace

EnvironmentMap sagemaker_variables(const JobDescription& job) {
  const auto& paths = job.paths;
  nlohmann::json user_hyperparameters = nlohmann::json::object();
  nlohmann::json framework_parameters = nlohmann::json::object();
  for (const auto& [key, value] : job.hyperparameters.decoded().items()) {
    if (key.rfind("sagemaker_", 0) != 0) {
      user_hyperparameters[key] = value;
    } else if (!is_toolkit_parameter(key)) {
      framework_parameters[key] = value;
    }
  }

  nlohmann::json channel_dirs = nlohmann::json::object();
  nlohmann::json channel_names = nlohmann::json::array();
  for (const auto& channel : job.input.channels) {
    channel_dirs[channel.name] = paths.channel(channel.name).string();
    channel_names.push_back(channel.name);  // channels are kept sorted
  }

  nlohmann::json resource_config = job.resource_config ? job.resource_config->document
                                                       : nlohmann::json{{"current_host", job.cluster.current_host},
                                                                        {"hosts", job.cluster.hosts}};
  std::string instance_type = "local";
  std::string instance_group = "homogeneousCluster";
  nlohmann::json group_names = nlohmann::json::array();
  nlohmann::json groups_by_name = nlohmann::json::object();
  nlohmann::json current_group_hosts = nlohmann::json::array();
  if (job.resource_config) {
    if (!job.resource_config->current_instance_type.empty()) instance_type = job.resource_config->current_instance_type;
    if (!job.resource_config->current_group_name.empty()) instance_group = job.resource_config->current_group_name;
    if (auto groups = job.resource_config->document.find("instance_groups");
        groups != job.resource_config->document.end() && groups->is_array()) {
      for (const auto& group : *groups) {
        std::string name = group.value("instance_group_name", "");
        group_names.push_back(name);
        groups_by_name[name] = group;
        if (name == instance_group && group.contains("hosts")) current_group_hosts = group["hosts"];
      }
    }
  }
  nlohmann::json user_args = nlohmann::json::array();
  for (const auto& [key, value] : user_hyperparameters.items()) {
    user_args.push_back((key.size() > 1 ? "--" : "-") + key);  // the toolkit's arg_name
    user_args.push_back(command_line_value(value));
  }
  const int gpus = job.device == "cuda" ? job.resources.gpus : 0;

  nlohmann::json values = {
      {"hosts", job.cluster.hosts},
      {"network_interface_name", job.cluster.network_interface},
      {"hps", user_hyperparameters},
      {"user_entry_point", nullptr},
      {"framework_params", framework_parameters},
      {"resource_config", resource_config},
      {"input_data_config", job.input.document.is_null() ? nlohmann::json::object() : job.input.document},
      {"output_data_dir", paths.output_data().string()},
      {"channels", channel_names},
      {"current_host", job.cluster.current_host},
      {"current_instance_type", instance_type},
      {"current_instance_group", instance_group},
      {"current_instance_group_hosts", current_group_hosts},
      {"instance_groups", group_names},
      {"instance_groups_dict", groups_by_name},
      {"distribution_instance_groups", group_names},
      {"is_hetero", group_names.size() > 1},
      {"module_name", "None"},
      {"log_level", 20},
      {"framework_module", nullptr},
      {"input_dir", paths.input().string()},
      {"input_config_dir", paths.config_dir().string()},
      {"output_dir", paths.output().string()},
      {"num_cpus", job.resources.cpus},
      {"num_gpus", gpus},
      {"model_dir", paths.model().string()},
      {"module_dir", (paths.base / "code").string()},
      {"user_args", user_args},
      {"output_intermediate_dir", paths.output_intermediate().string()},
  };
  // SM_TRAINING_ENV is the toolkit's whole environment object.
  nlohmann::json training_env = {
      {"additional_framework_parameters", framework_parameters},
      {"channel_input_dirs", channel_dirs},
      {"current_host", job.cluster.current_host},
      {"current_instance_group", instance_group},
      {"current_instance_group_hosts", current_group_hosts},
      {"current_instance_type", instance_type},
      {"distribution_hosts", job.cluster.hosts},
      {"distribution_instance_groups", group_names},
      {"framework_module", nullptr},
      {"hosts", job.cluster.hosts},
      {"hyperparameters", user_hyperparameters},
      {"input_config_dir", paths.config_dir().string()},
      {"input_data_config", values["input_data_config"]},
      {"input_dir", paths.input().string()},
      {"instance_groups", group_names},
      {"instance_groups_dict", groups_by_name},
      {"is_hetero", group_names.size() > 1},
      {"is_master", job.cluster.is_master()},
      {"is_modelparallel_enabled", nullptr},
      {"job_name", nullptr},
      {"log_level", 20},
      {"master_hostname", job.cluster.master_host},
      {"model_dir", paths.model().string()},
      {"module_dir", (paths.base / "code").string()},
      {"module_name", "None"},
      {"network_interface_name", job.cluster.network_interface},
      {"num_cpus", job.resources.cpus},
      {"num_gpus", gpus},
      {"output_data_dir", paths.output_data().string()},
      {"output_dir", paths.output().string()},
      {"output_intermediate_dir", paths.output_intermediate().string()},
      {"resource_config", resource_config},
      {"user_entry_point", nullptr},
  };
  values["training_env"] = training_env;

  EnvironmentMap variables;
  for (const auto& [key, value] : values.items()) variables["SM_" + upper(key)] = encode_environment_value(value);
  for (const auto& [name, dir] : channel_dirs.items()) variables["SM_CHANNEL_" + upper(name)] = dir.get<std::string>();
  for (const auto& [key, value] : user_hyperparameters.items()) {
    variables["SM_HP_" + upper(key)] = encode_environment_value(value);
  }
  return variables;
}

}  // namespace train
