// The SM_* variables: the SageMaker training toolkit's names and encodings, each host with its own values.
#include "job/job_description.h"
#include "job/sagemaker_environment.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

using namespace train;
using train::testing::TempJobDir;
using Json = nlohmann::json;

namespace {

// cpus: the process's affinity mask; host_cpus: every CPU of the host, SM_NUM_CPUS as the toolkit counts.
const HostResources gpu_host{.gpus = 8, .cpus = 48, .host_cpus = 96};
const HostResources cpu_host{.gpus = 0, .cpus = 2, .host_cpus = 4, .gpu_note = "built without CUDA"};

std::string resource_config_for(const std::string& current_host) {
  return R"({"current_host": ")" + current_host + R"(", "current_instance_type": "ml.p4d.24xlarge",
    "current_group_name": "homogeneousCluster", "hosts": ["algo-2", "algo-1"],
    "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": "ml.p4d.24xlarge",
                         "hosts": ["algo-2", "algo-1"]}],
    "network_interface_name": "eth1", "topology": null})";
}

const char* hyperparameters_text = R"({
  "epochs": "10", "optimizer": "sgd", "learning_rate": "0.1", "shuffle": "true", "lr_scheduler_step": "[30, 60]",
  "custom_mpi_options": "\"-x NAME=café\"", "note": "\"café\"", "sagemaker_program": "\"train.py\"",
  "sagemaker_distributed_dataparallel_enabled": "false", "_tuning_objective_metric": "\"validation:top1\"",
  "sagemaker_job_name": "\"tune-007\"", "sagemaker_container_log_level": "10"})";

const char* input_data_config_text = R"({
  "validation": {"TrainingInputMode": "File", "ContentType": "image/😀"},
  "train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key"},
  "my-data": {"TrainingInputMode": "FastFile"}})";

// One host's view of the same two-host job, whose ranks run a user's command (so `note` is the command's).
struct HostJob {
  TempJobDir dir;
  JobDescription job;
  EnvironmentMap variables;

  explicit HostJob(const std::string& current_host) {
    dir.write_config("resourceconfig.json", resource_config_for(current_host));
    dir.write_config("hyperparameters.json", hyperparameters_text);
    dir.write_config("inputdataconfig.json", input_data_config_text);
    for (const char* channel : {"train", "validation", "my-data"}) dir.make_channel_dir(channel);
    job = load_job_description(dir.paths(), {}, gpu_host, CheckMode::this_host, Workload::user_command);
    variables = sagemaker_variables(job, {{"TRAINING_JOB_NAME", "tune-007-3f2a"}, {"AWS_DEFAULT_REGION", "eu-west-1"}, {"AWS_REGION", "us-east-2"}});
  }
  std::string at(const std::string& name) const {
    auto it = variables.find(name);
    if (it == variables.end()) FAIL("no variable " << name);
    return it == variables.end() ? std::string() : it->second;
  }
  std::string path(const std::string& relative) const { return (dir.root() / relative).string(); }
};

bool is_ascii(const std::string& text) {
  for (unsigned char c : text) {
    if (c >= 0x80) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("SM_*: values are encoded as the toolkit encodes them", "[sagemaker_environment]") {
  auto encode = [](const Json& value) { return encode_environment_value(python_value_from_json(value)); };
  CHECK(encode(nullptr) == "");
  CHECK(encode("sgd") == "sgd");
  CHECK(encode("café") == "café");  // strings as they are, even non-ASCII
  CHECK(encode(10) == "10");
  CHECK(encode(0.1) == "0.1");
  CHECK(encode(true) == "true");
  CHECK(encode(Json::array({"algo-1", "algo-2"})) == R"(["algo-1","algo-2"])");
  // Compact, keys sorted, non-ASCII escaped as json.dumps(ensure_ascii=True) does (surrogate pairs included).
  CHECK(encode(Json{{"b", 1}, {"a", Json::array({1, "é"})}}) == R"({"a":[1,"\u00e9"],"b":1})");
  CHECK(encode(Json::array({"😀", "\x7f"})) == R"(["\ud83d\ude00","\u007f"])");
  // Numbers as Python's json.dumps writes them: floats as repr(), integers of any size exact.
  CHECK(encode(1e15) == "1000000000000000.0");
  CHECK(encode(Json::array({1e16, 0.0001, 1e-05, -0.0})) == "[1e+16,0.0001,1e-05,-0.0]");
  CHECK(encode_environment_value(*python_json_loads("[123456789012345678901234567890, NaN, -Infinity, 1E400]")) ==
        "[123456789012345678901234567890,NaN,-Infinity,Infinity]");
}

TEST_CASE("SM_*: the toolkit's variables for a two-host SageMaker job", "[sagemaker_environment]") {
  HostJob host("algo-2");

  SECTION("the exact set of names") {
    std::set<std::string> names;
    for (const auto& [name, value] : host.variables) names.insert(name);
    CHECK(names == std::set<std::string>{
                       "SM_CHANNELS", "SM_CHANNEL_MY-DATA", "SM_CHANNEL_TRAIN", "SM_CHANNEL_VALIDATION",
                       "SM_CURRENT_HOST", "SM_CURRENT_INSTANCE_GROUP", "SM_CURRENT_INSTANCE_GROUP_HOSTS",
                       "SM_CURRENT_INSTANCE_TYPE", "SM_DISTRIBUTION_INSTANCE_GROUPS", "SM_FRAMEWORK_MODULE",
                       "SM_FRAMEWORK_PARAMS", "SM_HOSTS", "SM_HPS", "SM_HP_CUSTOM_MPI_OPTIONS", "SM_HP_EPOCHS",
                       "SM_HP_LEARNING_RATE", "SM_HP_LR_SCHEDULER_STEP", "SM_HP_NOTE", "SM_HP_OPTIMIZER", "SM_HP_SHUFFLE",
                       "SM_INPUT_CONFIG_DIR", "SM_INPUT_DATA_CONFIG", "SM_INPUT_DIR", "SM_INSTANCE_GROUPS",
                       "SM_INSTANCE_GROUPS_DICT", "SM_IS_HETERO", "SM_LOG_LEVEL", "SM_MODEL_DIR", "SM_MODULE_DIR",
                       "SM_MODULE_NAME", "SM_NETWORK_INTERFACE_NAME", "SM_NUM_CPUS", "SM_NUM_GPUS", "SM_NUM_NEURONS",
                       "SM_OUTPUT_DATA_DIR", "SM_OUTPUT_DIR", "SM_OUTPUT_INTERMEDIATE_DIR", "SM_RESOURCE_CONFIG",
                       "SM_TRAINING_ENV", "SM_USER_ARGS", "SM_USER_ENTRY_POINT",
                       // the toolkit's own variables besides SM_*
                       "CURRENT_HOST", "SAGEMAKER_JOB_NAME", "SAGEMAKER_REGION"});
  }
  SECTION("hosts, resources and paths") {
    CHECK(host.at("SM_HOSTS") == R"(["algo-1","algo-2"])");
    CHECK(host.at("SM_CURRENT_HOST") == "algo-2");
    CHECK(host.at("SM_NUM_GPUS") == "8");
    CHECK(host.at("SM_NUM_CPUS") == "96");
    CHECK(host.at("SM_NETWORK_INTERFACE_NAME") == "eth1");
    CHECK(host.at("SM_MODEL_DIR") == host.path("model"));
    CHECK(host.at("SM_OUTPUT_DATA_DIR") == host.path("output/data"));
    CHECK(host.at("SM_OUTPUT_DIR") == host.path("output"));
    CHECK(host.at("SM_OUTPUT_INTERMEDIATE_DIR") == host.path("output/intermediate"));
    CHECK(host.at("SM_INPUT_DIR") == host.path("input"));
    CHECK(host.at("SM_INPUT_CONFIG_DIR") == host.path("input/config"));
    CHECK(host.at("SM_MODULE_DIR") == host.path("code"));
    CHECK(host.at("SM_NUM_NEURONS") == "0");
  }
  SECTION("values the toolkit derives from the platform's keys and the environment") {
    CHECK(host.at("SM_LOG_LEVEL") == "10");              // sagemaker_container_log_level
    CHECK(host.at("SM_USER_ENTRY_POINT") == "train.py");  // sagemaker_program
    CHECK(host.at("SM_MODULE_NAME") == "train");          // ... without ".py"
    CHECK(host.at("SM_FRAMEWORK_MODULE") == "");
    CHECK(Json::parse(host.at("SM_TRAINING_ENV")).at("job_name") == "tune-007-3f2a");  // TRAINING_JOB_NAME
    CHECK(host.at("CURRENT_HOST") == "algo-2");
    CHECK(host.at("SAGEMAKER_JOB_NAME") == "tune-007");  // sagemaker_job_name
    CHECK(host.at("SAGEMAKER_REGION") == "eu-west-1");   // no sagemaker_region: the environment's
    // The tuner's key is the platform's: in no user variable.
    CHECK(host.at("SM_HPS").find("_tuning_objective_metric") == std::string::npos);
    CHECK(host.at("SM_USER_ARGS").find("_tuning_objective_metric") == std::string::npos);
  }
  SECTION("instance groups") {
    CHECK(host.at("SM_CURRENT_INSTANCE_TYPE") == "ml.p4d.24xlarge");
    CHECK(host.at("SM_CURRENT_INSTANCE_GROUP") == "homogeneousCluster");
    CHECK(host.at("SM_CURRENT_INSTANCE_GROUP_HOSTS") == R"(["algo-2","algo-1"])");
    CHECK(host.at("SM_INSTANCE_GROUPS") == R"(["homogeneousCluster"])");
    // The toolkit's: no sagemaker_distribution_instance_groups and no distribution enabled, so none.
    CHECK(host.at("SM_DISTRIBUTION_INSTANCE_GROUPS") == "[]");
    CHECK(host.at("SM_IS_HETERO") == "false");
    CHECK(host.at("SM_INSTANCE_GROUPS_DICT") ==
          R"({"homogeneousCluster":{"hosts":["algo-2","algo-1"],"instance_group_name":"homogeneousCluster",)"
          R"("instance_type":"ml.p4d.24xlarge"}})");
  }
  SECTION("channels") {
    CHECK(host.at("SM_CHANNELS") == R"(["my-data","train","validation"])");
    CHECK(host.at("SM_CHANNEL_TRAIN") == host.path("input/data/train"));
    CHECK(host.at("SM_CHANNEL_VALIDATION") == host.path("input/data/validation"));
    CHECK(host.at("SM_CHANNEL_MY-DATA") == host.path("input/data/my-data"));  // hyphen kept
    CHECK(host.at("SM_INPUT_DATA_CONFIG") ==
          R"({"my-data":{"TrainingInputMode":"FastFile"},)"
          R"("train":{"S3DistributionType":"ShardedByS3Key","TrainingInputMode":"File"},)"
          R"("validation":{"ContentType":"image/\ud83d\ude00","TrainingInputMode":"File"}})");
  }
  SECTION("hyperparameters") {
    // train's launcher key custom_mpi_options is train's, and the command's too, as the toolkit passes it.
    CHECK(host.at("SM_HPS") ==
          R"({"custom_mpi_options":"-x NAME=caf\u00e9","epochs":10,"learning_rate":0.1,"lr_scheduler_step":[30,60],)"
          R"("note":"caf\u00e9","optimizer":"sgd","shuffle":true})");
    CHECK(host.at("SM_HP_EPOCHS") == "10");
    CHECK(host.at("SM_HP_OPTIMIZER") == "sgd");
    CHECK(host.at("SM_HP_LEARNING_RATE") == "0.1");
    CHECK(host.at("SM_HP_SHUFFLE") == "true");
    CHECK(host.at("SM_HP_LR_SCHEDULER_STEP") == "[30,60]");
    CHECK(host.at("SM_HP_NOTE") == "café");  // a string stays raw
    CHECK(host.at("SM_HP_CUSTOM_MPI_OPTIONS") == "-x NAME=café");
    CHECK(host.variables.count("SM_HP_SAGEMAKER_PROGRAM") == 0);
    // sagemaker_program is the toolkit's own; the other sagemaker_* keys are framework parameters.
    CHECK(host.at("SM_FRAMEWORK_PARAMS") == R"({"sagemaker_distributed_dataparallel_enabled":false})");
    // The toolkit's to_cmd_args: sorted keys, Python's str() of each value.
    CHECK(host.at("SM_USER_ARGS") ==
          R"(["--custom_mpi_options","-x NAME=caf\u00e9","--epochs","10","--learning_rate","0.1",)"
          R"("--lr_scheduler_step","[30, 60]","--note","caf\u00e9","--optimizer","sgd","--shuffle","True"])");
  }
  SECTION("the resource config as written") {
    CHECK(host.at("SM_RESOURCE_CONFIG") ==
          R"({"current_group_name":"homogeneousCluster","current_host":"algo-2",)"
          R"("current_instance_type":"ml.p4d.24xlarge","hosts":["algo-2","algo-1"],)"
          R"("instance_groups":[{"hosts":["algo-2","algo-1"],"instance_group_name":"homogeneousCluster",)"
          R"("instance_type":"ml.p4d.24xlarge"}],"network_interface_name":"eth1","topology":null})");
  }
  SECTION("SM_TRAINING_ENV is the whole environment as ASCII JSON") {
    const std::string text = host.at("SM_TRAINING_ENV");
    CHECK(is_ascii(text));
    Json env = Json::parse(text);
    CHECK(env.at("is_master") == false);
    CHECK(env.at("master_hostname") == "algo-1");
    CHECK(env.at("current_host") == "algo-2");
    CHECK(env.at("hosts") == Json::array({"algo-1", "algo-2"}));
    // The toolkit's: its instance group is not a distribution's (none is enabled), so none.
    CHECK(env.at("distribution_hosts") == Json::array());
    CHECK(env.at("network_interface_name") == "eth1");
    CHECK(env.at("num_gpus") == 8);
    CHECK(env.at("num_cpus") == 96);
    CHECK(env.at("hyperparameters").at("epochs") == 10);
    CHECK(env.at("hyperparameters").at("note") == "café");
    CHECK_FALSE(env.at("hyperparameters").contains("sagemaker_program"));
    CHECK(env.at("additional_framework_parameters") == Json{{"sagemaker_distributed_dataparallel_enabled", false}});
    CHECK(env.at("channel_input_dirs") == Json{{"my-data", host.path("input/data/my-data")},
                                               {"train", host.path("input/data/train")},
                                               {"validation", host.path("input/data/validation")}});
    CHECK(env.at("model_dir") == host.path("model"));
    CHECK(env.at("resource_config").at("current_host") == "algo-2");
    CHECK(env.at("input_data_config").at("validation").at("ContentType") == "image/😀");
  }
  SECTION("every JSON-valued variable is ASCII") {
    for (const auto& [name, value] : host.variables) {
      if (name == "SM_HP_NOTE" || name == "SM_HP_CUSTOM_MPI_OPTIONS") continue;  // strings: raw, as the toolkit
      INFO(name << "=" << value);
      CHECK(is_ascii(value));
    }
  }
}

TEST_CASE("SM_*: each host of a job sees its own host's values", "[sagemaker_environment]") {
  HostJob first("algo-1");
  HostJob second("algo-2");
  CHECK(first.at("SM_CURRENT_HOST") == "algo-1");
  CHECK(second.at("SM_CURRENT_HOST") == "algo-2");
  CHECK(Json::parse(first.at("SM_TRAINING_ENV")).at("is_master") == true);
  CHECK(Json::parse(second.at("SM_TRAINING_ENV")).at("is_master") == false);
  CHECK(Json::parse(first.at("SM_TRAINING_ENV")).at("current_host") == "algo-1");
  CHECK(Json::parse(second.at("SM_TRAINING_ENV")).at("current_host") == "algo-2");
  CHECK(Json::parse(first.at("SM_RESOURCE_CONFIG")).at("current_host") == "algo-1");
  CHECK(Json::parse(second.at("SM_RESOURCE_CONFIG")).at("current_host") == "algo-2");
  // What does not depend on the host is the same on both.
  for (const char* name : {"SM_HOSTS", "SM_HPS", "SM_CHANNELS", "SM_USER_ARGS", "SM_HP_EPOCHS", "SM_NUM_GPUS"}) {
    INFO(name);
    CHECK(first.at(name) == second.at(name));
  }
  CHECK(Json::parse(first.at("SM_TRAINING_ENV")).at("master_hostname") == "algo-1");
  CHECK(Json::parse(second.at("SM_TRAINING_ENV")).at("master_hostname") == "algo-1");
}

TEST_CASE("SM_*: a local run with nothing configured", "[sagemaker_environment]") {
  TempJobDir dir;
  // A user's command (train -- CMD): train's own training would want a training channel.
  auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host, Workload::user_command);
  job.cluster = cluster_for_local_host("workstation");
  auto variables = sagemaker_variables(job);
  CHECK(variables.at("SM_HOSTS") == R"(["workstation"])");
  CHECK(variables.at("SM_CURRENT_HOST") == "workstation");
  CHECK(variables.at("SM_NUM_GPUS") == "0");
  CHECK(variables.at("SM_NUM_CPUS") == "4");
  CHECK(variables.at("SM_CHANNELS") == "[]");
  CHECK(variables.at("SM_HPS") == "{}");
  CHECK(variables.at("SM_USER_ARGS") == "[]");
  CHECK(variables.at("SM_FRAMEWORK_PARAMS") == "{}");
  CHECK(variables.at("SM_INPUT_DATA_CONFIG") == "{}");
  CHECK(variables.at("SM_RESOURCE_CONFIG") == R"({"current_host":"workstation","hosts":["workstation"]})");
  CHECK(variables.at("SM_CURRENT_INSTANCE_TYPE") == "local");
  CHECK(variables.at("SM_NETWORK_INTERFACE_NAME") == "eth0");
  CHECK(Json::parse(variables.at("SM_TRAINING_ENV")).at("is_master") == true);
  for (const auto& [name, value] : variables) {
    CHECK(name.rfind("SM_HP_", 0) != 0);
    CHECK(name.rfind("SM_CHANNEL_", 0) != 0);
  }
}

TEST_CASE("SM_USER_ARGS writes values as Python's str() would", "[sagemaker_environment]") {
  TempJobDir dir;
  dir.write_config("hyperparameters.json",
                   R"({"image_shape": [3, 32, 32], "warmup_epochs": 2.5, "nothing": "null",
                       "augmentation_type": "\"none\"", "shuffle": "False", "b": "1",
                       "layers": "{\"b\": 2, \"a\": \"x\"}"})");
  auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host, Workload::user_command);
  auto variables = sagemaker_variables(job);
  CHECK(Json::parse(variables.at("SM_USER_ARGS")) ==
        Json::array({"--augmentation_type", "none", "-b", "1", "--image_shape", "[3, 32, 32]", "--layers", "a=x,b=2",
                     "--nothing", "", "--shuffle", "False", "--warmup_epochs", "2.5"}));
  CHECK(user_command_arguments(job) == Json::parse(variables.at("SM_USER_ARGS")).get<std::vector<std::string>>());
  CHECK(variables.at("SM_HP_NOTHING") == "");  // None exports as ""
  CHECK(variables.at("SM_HP_IMAGE_SHAPE") == "[3,32,32]");
  CHECK(variables.at("SM_HP_SHUFFLE") == "False");  // "False" is not JSON: a string, raw
}

TEST_CASE("SM_NUM_NEURONS: NeuronCores as the toolkit counts them", "[sagemaker_environment]") {
  CHECK(neuron_cores("ml.trn2.48xlarge") == 64);
  CHECK(neuron_cores("ml.p4d.24xlarge") == 0);
  CHECK(neuron_cores("local") == 0);
  CHECK(neuron_cores("") == 0);
}

TEST_CASE("what no command line or environment can carry (a NUL) is refused, naming the key",
          "[sagemaker_environment]") {
  // Issue 31: a value holding NUL was cut there in the arguments and SM_HP_X while SM_HPS kept it; a key
  // "a\u0000b" became --a. The toolkit cannot pass them either (Python: "embedded null byte").
  TempJobDir dir;
  dir.write_config("hyperparameters.json",
                   R"({"text": "a\u0000b", "a\u0000b": "1", "as-json": "[\"a\u0000b\"]", "table": {"k": "v\u0000w"},
                       "in-a-list": ["a\u0000b"], "fine": "1"})");
  const std::string message = train::testing::config_error_message(
      [&] { load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host, Workload::user_command); });
  const std::string file = dir.paths().hyperparameters().string();
  CHECK(message ==
        file + ": hyperparameter `a\\u0000b`: its name holds a NUL character, which no command-line argument or "
               "environment variable can carry (it would be cut there; the toolkit cannot pass it either); rename "
               "it\n" +
        // Not JSON to Python (a raw control character inside a string): it stays the string it is.
        file + ": hyperparameter `as-json`: its value \"[\\\"a\\u0000b\\\"]\" holds a NUL character, which its "
               "argument and SM_HP_AS-JSON cannot carry (they would be cut there; the toolkit cannot pass it either); "
               "remove it, or pass the value in a file\n" +
        file + ": hyperparameter `table`: its value {\"k\":\"v\\u0000w\"} holds a NUL character, which its argument "
               "cannot carry (it would be cut there; the toolkit cannot pass it either); remove it, or pass the "
               "value in a file\n" +
        file + ": hyperparameter `text`: its value \"a\\u0000b\" holds a NUL character, which its argument and "
               "SM_HP_TEXT cannot carry (they would be cut there; the toolkit cannot pass it either); remove it, or "
               "pass the value in a file");

  // Inside a list both are escaped, as Python's repr() and json.dumps() write them: nothing is lost.
  dir.write_config("hyperparameters.json", R"({"in-a-list": ["a\u0000b"]})");
  auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host, Workload::user_command);
  CHECK(user_command_arguments(job) == std::vector<std::string>{"--in-a-list", "['a\\x00b']"});
  CHECK(sagemaker_variables(job).at("SM_HP_IN-A-LIST") == "[\"a\\u0000b\"]");
}

TEST_CASE("SM_HP_ names are upper-cased as Python's str.upper(), and the empty key's argument is empty",
          "[sagemaker_environment]") {
  // Issue 31: SM_HP_GRößE (ASCII only) where the toolkit sets SM_HP_GRÖSSE; the empty key gave "-" where the
  // toolkit's to_cmd_args() gives "". tests/toolkit compares these with the toolkit itself.
  TempJobDir dir;
  dir.write_config("hyperparameters.json", R"({"größe": "1", "ﬁ": "2", "ı": "3", "": "4", "x": "5"})");
  auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host, Workload::user_command);
  auto variables = sagemaker_variables(job);
  CHECK(variables.at("SM_HP_GRÖSSE") == "1");
  CHECK(variables.at("SM_HP_FI") == "2");
  CHECK(variables.at("SM_HP_I") == "3");
  CHECK(variables.at("SM_HP_") == "4");
  CHECK(user_command_arguments(job) ==
        std::vector<std::string>{"", "4", "--größe", "1", "-x", "5", "-ı", "3", "-ﬁ", "2"});  // sorted(): code points
}
