#include "job/sagemaker_environment.h"

#include "job/platform_keys.h"

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

nlohmann::json user_hyperparameters(const JobDescription& job) {
  nlohmann::json user = nlohmann::json::object();
  for (const auto& [key, value] : job.hyperparameters.decoded().items()) {
    const HyperparameterSpec* spec = find_hyperparameter(key);
    if (is_platform_key(key) || (spec != nullptr && spec->launcher)) continue;
    user[key] = value;
  }
  return user;
}

std::vector<std::string> user_command_arguments(const JobDescription& job) {
  std::vector<std::string> arguments;
  const nlohmann::json hyperparameters = user_hyperparameters(job);
  for (const auto& [key, value] : hyperparameters.items()) {  // nlohmann's objects are sorted by key
    arguments.push_back((key.size() > 1 ? "--" : "-") + key);  // the toolkit's arg_name
    arguments.push_back(command_line_value(value));
  }
  return arguments;
}

int neuron_cores(const std::string& instance_type) {
  return instance_type.find("trn2.48xlarge") != std::string::npos ? 64 : 0;
}

EnvironmentMap sagemaker_variables(const JobDescription& job, const EnvironmentMap& environment) {
  const auto& paths = job.paths;
  const nlohmann::json user_hps = user_hyperparameters(job);
  nlohmann::json framework_parameters = nlohmann::json::object();
  for (const auto& [key, value] : job.hyperparameters.decoded().items()) {
    if (is_platform_key(key) && !is_toolkit_key(key)) framework_parameters[key] = value;
  }

  nlohmann::json channel_dirs = nlohmann::json::object();
  nlohmann::json channel_names = nlohmann::json::array();
  for (const auto& channel : job.input.channels) {
    channel_dirs[channel.name] = paths.channel(channel.name).string();
    channel_names.push_back(channel.name);  // channels are kept sorted
  }

  nlohmann::json resource_config = job.resource_config ? job.resource_config->document
                                                       : nlohmann::json{{"current_host", job.cluster.current_host},
                                                                        {"hosts", job.cluster.all_hosts}};
  std::string instance_type = "local";
  std::string instance_group = "homogeneousCluster";
  nlohmann::json group_names = nlohmann::json::array();
  nlohmann::json groups_by_name = nlohmann::json::object();
  nlohmann::json current_group_hosts = nlohmann::json::array();
  nlohmann::json topology = nlohmann::json::array();
  if (job.resource_config) {
    if (!job.resource_config->current_instance_type.empty()) instance_type = job.resource_config->current_instance_type;
    if (!job.resource_config->current_group_name.empty()) instance_group = job.resource_config->current_group_name;
    const auto& document = job.resource_config->document;
    if (auto groups = document.find("instance_groups"); groups != document.end() && groups->is_array()) {
      for (const auto& group : *groups) {
        std::string name = group.value("instance_group_name", "");
        group_names.push_back(name);
        groups_by_name[name] = group;
        if (name == instance_group && group.contains("hosts")) current_group_hosts = group["hosts"];
      }
    }
    if (auto found = document.find("topology"); found != document.end() && found->is_array()) topology = *found;
  }
  // The toolkit's distribution groups: the hyperparameter's, else this host's own group when a distribution
  // is enabled, else none.
  nlohmann::json distribution_groups = nlohmann::json::array();
  if (job.platform.distribution_instance_groups) {
    distribution_groups = *job.platform.distribution_instance_groups;
  } else {
    for (const char* enabled : {"sagemaker_mpi_enabled", "sagemaker_parameter_server_enabled",
                                "sagemaker_distributed_dataparallel_enabled", "sagemaker_pytorch_ddp_enabled",
                                "sagemaker_pytorch_xla_multi_worker_enabled",
                                "sagemaker_multi_worker_mirrored_strategy_enabled", "sagemaker_torch_distributed_enabled"}) {
      auto flag = framework_parameters.find(enabled);
      if (flag != framework_parameters.end() && flag->is_boolean() && flag->get<bool>()) {
        distribution_groups.push_back(instance_group);
        break;
      }
    }
  }
  // Python's str() of the program, as the toolkit's module name ("None" when there is none), less ".py".
  const auto program_variable = lookup(environment, "SAGEMAKER_PROGRAM");
  const nlohmann::json entry_point = program_variable ? nlohmann::json(*program_variable) : job.platform.program;
  std::string module_name = python_str(entry_point);
  if (module_name.size() > 3 && module_name.compare(module_name.size() - 3, 3, ".py") == 0) {
    module_name.resize(module_name.size() - 3);
  }
  const nlohmann::json module_dir = job.platform.submit_directory.is_null()
                                        ? nlohmann::json((paths.base / "code").string())
                                        : nlohmann::json(python_str(job.platform.submit_directory));
  const auto framework_module = lookup(environment, "SAGEMAKER_TRAINING_MODULE");
  const auto job_name = lookup(environment, "TRAINING_JOB_NAME");
  const int gpus = job.device == "cuda" ? job.resources.gpus : 0;
  const int neurons = neuron_cores(instance_type);
  nlohmann::json user_args = user_command_arguments(job);

  nlohmann::json values = {
      {"hosts", job.cluster.all_hosts},
      {"network_interface_name", job.cluster.network_interface},
      {"hps", user_hps},
      {"user_entry_point", entry_point},
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
      {"distribution_instance_groups", distribution_groups},
      {"is_hetero", group_names.size() > 1},
      {"module_name", module_name},
      {"log_level", job.platform.log_level},
      {"framework_module", framework_module ? nlohmann::json(*framework_module) : nlohmann::json()},
      {"input_dir", paths.input().string()},
      {"input_config_dir", paths.config_dir().string()},
      {"output_dir", paths.output().string()},
      {"num_cpus", job.resources.cpus},
      {"num_gpus", gpus},
      {"num_neurons", neurons},
      {"model_dir", paths.model().string()},
      {"module_dir", module_dir},
      {"user_args", user_args},
      {"output_intermediate_dir", paths.output_intermediate().string()},
  };
  if (!topology.empty()) values["topology"] = topology;  // the toolkit exports it only when there is one
  // SM_TRAINING_ENV is the toolkit's whole environment object.
  nlohmann::json training_env = {
      {"additional_framework_parameters", framework_parameters},
      {"channel_input_dirs", channel_dirs},
      {"current_host", job.cluster.current_host},
      {"current_instance_group", instance_group},
      {"current_instance_group_hosts", current_group_hosts},
      {"current_instance_type", instance_type},
      {"distribution_hosts", job.cluster.hosts},
      {"distribution_instance_groups", distribution_groups},
      {"framework_module", values["framework_module"]},
      {"hosts", job.cluster.all_hosts},
      {"hyperparameters", user_hps},
      {"input_config_dir", paths.config_dir().string()},
      {"input_data_config", values["input_data_config"]},
      {"input_dir", paths.input().string()},
      {"instance_groups", group_names},
      {"instance_groups_dict", groups_by_name},
      {"is_hetero", group_names.size() > 1},
      {"is_master", job.cluster.is_master()},
      {"is_modelparallel_enabled", nullptr},
      {"is_smddpmprun_installed", false},
      {"is_smddprun_installed", false},
      {"job_name", job_name ? nlohmann::json(*job_name) : nlohmann::json()},
      {"log_level", job.platform.log_level},
      {"master_hostname", job.cluster.master_host},
      {"model_dir", paths.model().string()},
      {"module_dir", module_dir},
      {"module_name", module_name},
      {"network_interface_name", job.cluster.network_interface},
      {"num_cpus", job.resources.cpus},
      {"num_gpus", gpus},
      {"num_neurons", neurons},
      {"output_data_dir", paths.output_data().string()},
      {"output_dir", paths.output().string()},
      {"output_intermediate_dir", paths.output_intermediate().string()},
      {"resource_config", resource_config},
      {"topology", topology},
      {"user_entry_point", entry_point},
  };
  values["training_env"] = training_env;

  EnvironmentMap variables;
  for (const auto& [key, value] : values.items()) variables["SM_" + upper(key)] = encode_environment_value(value);
  for (const auto& [name, dir] : channel_dirs.items()) variables["SM_CHANNEL_" + upper(name)] = dir.get<std::string>();
  for (const auto& [key, value] : user_hps.items()) variables["SM_HP_" + upper(key)] = encode_environment_value(value);
  // What else the toolkit sets in its own environment before it starts the user's program.
  variables["CURRENT_HOST"] = job.cluster.current_host;
  variables["SAGEMAKER_JOB_NAME"] = job.platform.job_name;
  std::string region = job.platform.region;
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {  // where boto3 finds the region otherwise
    if (region.empty()) region = lookup(environment, name).value_or("");
  }
  variables["SAGEMAKER_REGION"] = region;
  return variables;
}

}  // namespace train
