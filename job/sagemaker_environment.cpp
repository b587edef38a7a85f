#include "job/sagemaker_environment.h"

#include "common/json_file.h"
#include "job/platform_keys.h"
#include "job/training_hosts.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace train {

std::string encode_environment_value(const PythonValue& value) {
  if (value.kind == PythonValue::Kind::none) return "";
  if (value.is_string()) return value.text;
  return python_json_dumps(value);
}

namespace {

// The toolkit's variable for a user hyperparameter: "SM_" + ("hp_" + key).upper(), with Python's upper()
// ("größe" gives SM_HP_GRÖSSE).
std::string hyperparameter_variable_name(const std::string& key) { return "SM_HP_" + python_upper(key); }

// The toolkit's command-line form of one hyperparameter value (its mapping.to_cmd_args): None becomes "",
// a dict "k=v,k2=v2" in sorted key order, anything else Python's str().
std::string command_line_value(const PythonValue& value) {
  if (value.kind == PythonValue::Kind::none) return "";
  if (value.kind == PythonValue::Kind::dict) {
    std::string joined;
    for (const auto& [key, item] : sorted_entries(value)) joined += (joined.empty() ? "" : ",") + key + "=" + python_str(item);
    return joined;
  }
  return python_str(value);
}

PythonValue dict(std::vector<std::pair<std::string, PythonValue>> entries) {
  PythonValue value;
  value.kind = PythonValue::Kind::dict;
  value.entries = std::move(entries);
  return value;
}

PythonValue py(const nlohmann::json& value) { return python_value_from_json(value); }

// The toolkit's value of a platform key, or `fallback` when the job does not set it.
PythonValue platform_value(const JobDescription& job, std::string_view key, PythonValue fallback) {
  const PythonValue* value = find_entry(job.hyperparameters.toolkit_values(), key);
  return value != nullptr ? *value : fallback;
}

}  // namespace

PythonValue user_hyperparameters(const JobDescription& job) {
  PythonValue user = dict({});
  for (const auto& [key, value] : job.hyperparameters.toolkit_values().entries) {
    if (!is_platform_key(key)) user.entries.emplace_back(key, value);  // train's launcher keys too, as the toolkit
  }
  return user;
}

std::vector<std::string> user_command_arguments(const JobDescription& job) {
  std::vector<std::string> arguments;
  for (const auto& [key, value] : sorted_entries(user_hyperparameters(job))) {
    // The toolkit's arg_name: "--" before a name of more than one character (Python's, not UTF-8's bytes),
    // "-" before one of one, and the empty name as it is: an empty argument.
    const auto characters = std::count_if(key.begin(), key.end(), [](char c) { return (c & 0xC0) != 0x80; });
    arguments.push_back(characters == 0 ? "" : (characters > 1 ? "--" : "-") + key);
    arguments.push_back(command_line_value(value));
  }
  return arguments;
}

std::vector<std::string> what_no_command_can_carry(const JobDescription& job, const EnvironmentMap& environment) {
  auto holds_nul = [](std::string_view text) { return text.find('\0') != std::string_view::npos; };
  const std::string source = job.paths.hyperparameters().string();
  std::vector<std::string> problems;
  std::set<std::string> user_variables;
  for (const auto& [key, value] : sorted_entries(user_hyperparameters(job))) {
    const std::string variable = hyperparameter_variable_name(key);
    user_variables.insert(variable);
    const std::string shown = hyperparameter_key_for_message(key);
    if (holds_nul(key)) {
      problems.push_back(fmt::format("{}: hyperparameter `{}`: its name holds a NUL character, which no command-line "
                                     "argument or environment variable can carry (it would be cut there; the toolkit "
                                     "cannot pass it either); rename it",
                                     source, shown));
      continue;
    }
    std::vector<std::string> cut;
    if (holds_nul(command_line_value(value))) cut.push_back("its argument");
    if (holds_nul(encode_environment_value(value))) cut.push_back(variable);
    if (cut.empty()) continue;
    const auto decoded = job.hyperparameters.decoded().find(key);
    const std::string value_text =
        decoded != job.hyperparameters.decoded().end() ? quote_json_for_message(*decoded) : python_repr(value);
    problems.push_back(fmt::format("{}: hyperparameter `{}`: its value {} holds a NUL character, which {} cannot carry "
                                   "({} would be cut there; the toolkit cannot pass it either); remove it, or pass "
                                   "the value in a file",
                                   source, shown, value_text, fmt::join(cut, " and "), cut.size() > 1 ? "they" : "it"));
  }
  for (const auto& [name, value] : sagemaker_variables(job, environment)) {
    if (user_variables.count(name) == 0 && holds_nul(value)) {
      problems.push_back(fmt::format("{}: the hyperparameters make {} hold a NUL character, which no environment "
                                     "variable can carry (the toolkit cannot pass it either); remove it from the "
                                     "sagemaker_* hyperparameter that sets it",
                                     source, name));
    }
  }
  return problems;
}

int neuron_cores(const std::string& instance_type) {
  return instance_type.find("trn2.48xlarge") != std::string::npos ? 64 : 0;
}

EnvironmentMap sagemaker_variables(const JobDescription& job, const EnvironmentMap& environment) {
  const auto& paths = job.paths;
  const PythonValue user_hps = user_hyperparameters(job);
  PythonValue framework_parameters = dict({});
  for (const auto& [key, value] : job.hyperparameters.toolkit_values().entries) {
    if (is_platform_key(key) && !is_toolkit_key(key)) framework_parameters.entries.emplace_back(key, value);
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
  // The toolkit's values; what runs agrees with them (job/training_hosts.h: the master is the first
  // distribution host, as the toolkit's master_hostname).
  const PythonValue& distribution_groups = job.distribution.value;
  const std::vector<std::string> training_hosts =
      distribution_hosts(job.resource_config, job.distribution.names, job.cluster.all_hosts);
  // The program: the SAGEMAKER_PROGRAM variable, else the hyperparameter; its module name is Python's str()
  // of it ("None" when there is none) less ".py".
  const auto program_variable = lookup(environment, "SAGEMAKER_PROGRAM");
  const PythonValue entry_point = program_variable ? PythonValue::make_string(*program_variable)
                                                   : platform_value(job, "sagemaker_program", PythonValue{});
  std::string module_name = python_str(entry_point);
  if (module_name.size() > 3 && module_name.compare(module_name.size() - 3, 3, ".py") == 0) {
    module_name.resize(module_name.size() - 3);
  }
  const PythonValue module_dir = PythonValue::make_string(
      python_str(platform_value(job, "sagemaker_submit_directory", PythonValue::make_string((paths.base / "code").string()))));
  const PythonValue log_level = platform_value(job, "sagemaker_container_log_level", PythonValue::make_integer(20));
  const auto framework_module = lookup(environment, "SAGEMAKER_TRAINING_MODULE");
  const auto job_name = lookup(environment, "TRAINING_JOB_NAME");
  const int gpus = job.device == Device::cuda ? job.resources.gpus : 0;
  const int neurons = neuron_cores(instance_type);
  const PythonValue user_args = py(user_command_arguments(job));
  const PythonValue input_data_config = py(job.input.document.is_null() ? nlohmann::json::object() : job.input.document);
  const PythonValue framework_module_value = framework_module ? PythonValue::make_string(*framework_module) : PythonValue{};
  const PythonValue is_hetero = py(group_names.size() > 1);

  PythonValue values = dict({
      {"hosts", py(job.cluster.all_hosts)},
      {"network_interface_name", py(job.cluster.network_interface)},
      {"hps", user_hps},
      {"user_entry_point", entry_point},
      {"framework_params", framework_parameters},
      {"resource_config", py(resource_config)},
      {"input_data_config", input_data_config},
      {"output_data_dir", py(paths.output_data().string())},
      {"channels", py(channel_names)},
      {"current_host", py(job.cluster.current_host)},
      {"current_instance_type", py(instance_type)},
      {"current_instance_group", py(instance_group)},
      {"current_instance_group_hosts", py(current_group_hosts)},
      {"instance_groups", py(group_names)},
      {"instance_groups_dict", py(groups_by_name)},
      {"distribution_instance_groups", distribution_groups},
      {"is_hetero", is_hetero},
      {"module_name", py(module_name)},
      {"log_level", log_level},
      {"framework_module", framework_module_value},
      {"input_dir", py(paths.input().string())},
      {"input_config_dir", py(paths.config_dir().string())},
      {"output_dir", py(paths.output().string())},
      {"num_cpus", PythonValue::make_integer(job.resources.host_cpus)},
      {"num_gpus", PythonValue::make_integer(gpus)},
      {"num_neurons", PythonValue::make_integer(neurons)},
      {"model_dir", py(paths.model().string())},
      {"module_dir", module_dir},
      {"user_args", user_args},
      {"output_intermediate_dir", py(paths.output_intermediate().string())},
  });
  if (!topology.empty()) values.entries.emplace_back("topology", py(topology));  // only when there is one
  // SM_TRAINING_ENV is the toolkit's whole environment object.
  PythonValue training_env = dict({
      {"additional_framework_parameters", framework_parameters},
      {"channel_input_dirs", py(channel_dirs)},
      {"current_host", py(job.cluster.current_host)},
      {"current_instance_group", py(instance_group)},
      {"current_instance_group_hosts", py(current_group_hosts)},
      {"current_instance_type", py(instance_type)},
      {"distribution_hosts", py(training_hosts)},
      {"distribution_instance_groups", distribution_groups},
      {"framework_module", framework_module_value},
      {"hosts", py(job.cluster.all_hosts)},
      {"hyperparameters", user_hps},
      {"input_config_dir", py(paths.config_dir().string())},
      {"input_data_config", input_data_config},
      {"input_dir", py(paths.input().string())},
      {"instance_groups", py(group_names)},
      {"instance_groups_dict", py(groups_by_name)},
      {"is_hetero", is_hetero},
      {"is_master", py(job.cluster.is_master())},
      {"is_modelparallel_enabled", PythonValue{}},
      {"is_smddpmprun_installed", py(false)},
      {"is_smddprun_installed", py(false)},
      {"job_name", job_name ? PythonValue::make_string(*job_name) : PythonValue{}},
      {"log_level", log_level},
      {"master_hostname", py(job.cluster.master_host)},
      {"model_dir", py(paths.model().string())},
      {"module_dir", module_dir},
      {"module_name", py(module_name)},
      {"network_interface_name", py(job.cluster.network_interface)},
      {"num_cpus", PythonValue::make_integer(job.resources.host_cpus)},
      {"num_gpus", PythonValue::make_integer(gpus)},
      {"num_neurons", PythonValue::make_integer(neurons)},
      {"output_data_dir", py(paths.output_data().string())},
      {"output_dir", py(paths.output().string())},
      {"output_intermediate_dir", py(paths.output_intermediate().string())},
      {"resource_config", py(resource_config)},
      {"topology", py(topology)},
      {"user_entry_point", entry_point},
  });
  values.entries.emplace_back("training_env", training_env);

  EnvironmentMap variables;
  for (const auto& [key, value] : values.entries) {
    variables["SM_" + python_upper(key)] = encode_environment_value(value);
  }
  for (const auto& [name, dir] : channel_dirs.items()) {
    variables["SM_CHANNEL_" + python_upper(name)] = dir.get<std::string>();
  }
  for (const auto& [key, value] : user_hps.entries) {
    variables[hyperparameter_variable_name(key)] = encode_environment_value(value);
  }
  // What else the toolkit sets in its own environment before it starts the user's program.
  variables["CURRENT_HOST"] = job.cluster.current_host;
  variables["SAGEMAKER_JOB_NAME"] = job.platform.job_name;
  std::string region = job.platform.region;
  // Else boto3's region, which (without a ~/.aws/config) is AWS_DEFAULT_REGION's; boto3 reads no AWS_REGION.
  if (region.empty()) region = lookup(environment, "AWS_DEFAULT_REGION").value_or("");
  variables["SAGEMAKER_REGION"] = region;
  return variables;
}

}  // namespace train
