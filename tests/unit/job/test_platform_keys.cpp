// The platform's hyperparameters (tuning jobs, the SDK's keys), a user command's own hyperparameters, the
// toolkit's rank count, custom_mpi_options as the toolkit reads them, heterogeneous clusters' training hosts,
// and the checkpoint and TensorBoard folders that SageMaker's configs may move.
#include "job/job_description.h"
#include "job/mpi_options.h"
#include "job/sagemaker_environment.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace train;
using train::testing::config_error_message;
using train::testing::TempJobDir;
using Json = nlohmann::json;

namespace {

const HostResources cpu_host{.gpus = 0, .cpus = 4, .gpu_note = "built without CUDA"};

// What SageMaker's automatic model tuning hands a training job of a PyTorch-style estimator: the tuned
// values, the static ones, the SDK's keys and the tuner's (as written in a real job's description).
const char* tuning_job_hyperparameters = R"({
  "_tuning_objective_metric": "\"validation:top1\"", "learning_rate": "0.0731", "mini_batch_size": "\"64\"",
  "epochs": "2", "num_layers": "18", "sagemaker_container_log_level": "20",
  "sagemaker_estimator_class_name": "\"Estimator\"", "sagemaker_estimator_module": "\"sagemaker.estimator\"",
  "sagemaker_job_name": "\"resnet-hpo-2026-01-01-00-00-00-000\"", "sagemaker_program": "\"train.py\"",
  "sagemaker_region": "\"us-east-1\"", "sagemaker_submit_directory": "\"s3://bucket/resnet-hpo/source/sourcedir.tar.gz\"",
  "default_user_module_name": "\"train\""})";

std::string two_hosts(const std::string& current) {
  return R"({"current_host": ")" + current + R"(", "hosts": ["algo-1", "algo-2"]})";
}

// A heterogeneous cluster: algo-1 (CPU, data) and algo-2, algo-3 (GPU), listed unsorted as SageMaker does.
std::string heterogeneous(const std::string& current, const std::string& group) {
  return R"({"current_host": ")" + current + R"(", "current_group_name": ")" + group + R"(",
    "current_instance_type": "ml.c5.xlarge", "hosts": ["algo-1", "algo-2", "algo-3"],
    "instance_groups": [
      {"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1"]},
      {"instance_group_name": "gpu", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-3", "algo-2"]}]})";
}

// One host's folder of that cluster: `current` (of `group`), with `hyperparameters`.
void write_heterogeneous_host(const TempJobDir& dir, const std::string& current, const std::string& group,
                              const std::string& hyperparameters) {
  dir.write_config("resourceconfig.json", heterogeneous(current, group));
  dir.write_config("hyperparameters.json", hyperparameters);
}

JobDescription load(const TempJobDir& dir, Workload workload = Workload::train_resnet,
                    CheckMode mode = CheckMode::this_host) {
  return load_job_description(dir.paths(), {}, cpu_host, mode, workload);
}

}  // namespace

TEST_CASE("platform keys: a tuning job's hyperparameters are valid", "[platform_keys]") {
  TempJobDir dir;
  dir.add_train_channel();
  dir.write_config("hyperparameters.json", tuning_job_hyperparameters);
  JobDescription job = load(dir);
  CHECK(job.hyperparameters.learning_rate == 0.0731);
  CHECK(job.hyperparameters.mini_batch_size == 64);
  CHECK(job.platform.job_name == "resnet-hpo-2026-01-01-00-00-00-000");
  CHECK(job.platform.region == "us-east-1");
  CHECK(sagemaker_variables(job).at("SM_USER_ENTRY_POINT") == "train.py");
  const Json description = describe_effective_configuration(job);
  CHECK(description.at("platform_hyperparameters").at("_tuning_objective_metric") == "validation:top1");
  CHECK(description.at("platform_hyperparameters").size() == 9);
  CHECK_FALSE(description.at("hyperparameters").contains("_tuning_objective_metric"));
  // A key that is neither the platform's nor train's is still an error, with the nearest name.
  dir.write_config("hyperparameters.json", R"({"_tuning_objective_metric": "\"loss\"", "learning-rate": "0.1"})");
  CHECK(config_error_message([&] { load(dir); }).find("`learning-rate` is not known; did you mean `learning_rate`?") !=
        std::string::npos);
}

TEST_CASE("platform keys: sagemaker_mpi_num_processes is the job's rank count", "[platform_keys]") {
  TempJobDir dir;
  dir.add_train_channel();
  dir.write_config("resourceconfig.json", two_hosts("algo-1"));
  dir.write_config("hyperparameters.json", R"({"sagemaker_mpi_num_processes": "4", "mini_batch_size": "8"})");
  CHECK(load(dir).ranks_per_host == 2);
  dir.write_config("hyperparameters.json",
                   R"({"sagemaker_mpi_num_processes": "4", "sagemaker_mpi_num_of_processes_per_host": "2"})");
  CHECK(load(dir).ranks_per_host == 2);
  dir.write_config("hyperparameters.json", R"({"sagemaker_mpi_num_processes": "3"})");
  CHECK(config_error_message([&] { load(dir); }) ==
        "hyperparameter `sagemaker_mpi_num_processes` is 3 but the job has 2 training hosts, each running the "
            "same number of ranks; use a multiple of 2");
  dir.write_config("hyperparameters.json", R"({"sagemaker_mpi_num_processes": "8", "processes_per_host": "2"})");
  CHECK(config_error_message([&] { load(dir); }) ==
        "hyperparameters `sagemaker_mpi_num_processes` (8 ranks) and processes_per_host (2 per host on 2 hosts) "
        "disagree; set only one");
  dir.write_config("hyperparameters.json", R"({"sagemaker_mpi_num_processes": "\"many\""})");
  CHECK(config_error_message([&] { load(dir); }) ==
        "hyperparameter `sagemaker_mpi_num_processes`: expected the job's number of ranks, a positive integer, got "
        "\"many\"");
}

TEST_CASE("platform keys: a user command's hyperparameters are its own", "[platform_keys]") {
  TempJobDir dir;
  dir.write_config("hyperparameters.json",
                   R"({"batch-size": "\"64\"", "lr": "0.01", "epochs": "\"ten\"", "processes_per_host": "2",
                       "sagemaker_mpi_custom_mpi_options": "\"--NCCL_DEBUG WARN\"", "v": "true",
                       "_tuning_objective_metric": "\"loss\"", "sagemaker_program": "\"train.py\""})");
  // train's own training rejects them...
  const std::string refused = config_error_message([&] { load(dir); });
  CHECK(refused.find("`batch-size` is not known") != std::string::npos);
  CHECK(refused.find("hyperparameter `epochs`: expected a positive integer, got \"\\\"ten\\\"\"") != std::string::npos);
  // ... a user command takes them all, and only the launcher's keys are train's.
  JobDescription job = load(dir, Workload::user_command);
  CHECK(job.ranks_per_host == 2);
  CHECK(job.hyperparameters.mpi_options().nccl_debug == "WARN");
  // Every key that is not the platform's reaches the command, train's launcher keys too, as the toolkit
  // passes them.
  CHECK(user_command_arguments(job) == std::vector<std::string>{"--batch-size", "64", "--epochs", "ten", "--lr", "0.01",
                                                                "--processes_per_host", "2", "-v", "True"});
  CHECK(sagemaker_variables(job).at("SM_HP_PROCESSES_PER_HOST") == "2");
  const Json description = describe_effective_configuration(job);
  CHECK(description.at("workload") == "a user command");
  CHECK(description.at("command_hyperparameters") ==
        Json{{"batch-size", "64"}, {"epochs", "ten"}, {"lr", 0.01}, {"processes_per_host", 2}, {"v", true}});
  CHECK(description.at("hyperparameters") == Json{{"processes_per_host", 2}, {"custom_mpi_options", "--NCCL_DEBUG WARN"}});
  // The launcher's keys are still checked.
  dir.write_config("hyperparameters.json", R"({"lr": "0.01", "processes_per_host": "four"})");
  CHECK(config_error_message([&] { load(dir, Workload::user_command); })
            .find("hyperparameter `processes_per_host`: expected an integer from 1 to 1024, got \"four\"") !=
        std::string::npos);
}

TEST_CASE("custom_mpi_options: NCCL_DEBUG taken out as the toolkit's argparse does", "[platform_keys]") {
  auto parse = [](const std::string& text) { return parse_custom_mpi_options(text, "custom_mpi_options"); };
  using Words = std::vector<std::string>;
  CHECK(parse("--NCCL_DEBUG WARN -x FOO=1").nccl_debug == "WARN");
  CHECK(parse("--NCCL_DEBUG WARN -x FOO=1").arguments == Words{"-x", "FOO=1"});
  CHECK(parse("-x A=1 --NCCL_DEBUG=TRACE --mca pml ob1").arguments == Words{"-x", "A=1", "--mca", "pml", "ob1"});
  CHECK(parse("-x A=1 --NCCL_DEBUG=TRACE").nccl_debug == "TRACE");
  CHECK(parse("--NCCL_DEB INFO").nccl_debug == "INFO");  // an abbreviation argparse accepts
  CHECK(parse("--NCCL_DEBUG WARN --NCCL_DEBUG VERSION").nccl_debug == "VERSION");  // the last wins
  CHECK_FALSE(parse("-x NCCL_DEBUG=INFO").nccl_debug.has_value());  // mpirun's own -x stays mpirun's
  CHECK(parse("-x NCCL_DEBUG=INFO").arguments == Words{"-x", "NCCL_DEBUG=INFO"});
  CHECK(parse("-- --NCCL_DEBUG WARN").arguments == Words{"--", "--NCCL_DEBUG", "WARN"});
  CHECK(parse("").arguments.empty());
  CHECK(config_error_message([&] { parse("--NCCL_DEBUG"); }) ==
        "custom_mpi_options: `--NCCL_DEBUG` needs a value, such as `--NCCL_DEBUG WARN` (NCCL's log level: VERSION, "
        "WARN, INFO or TRACE)");
  CHECK_THROWS_AS(parse("--NCCL_DEBUG -x"), ConfigError);
  // Found at validation time, in the hyperparameters.
  TempJobDir dir;
  dir.write_config("hyperparameters.json", R"({"custom_mpi_options": "\"-x A=1 --NCCL_DEBUG\""})");
  CHECK(config_error_message([&] { load(dir); }).find("`--NCCL_DEBUG` needs a value") != std::string::npos);
}

TEST_CASE("heterogeneous clusters: only the distribution's instance groups train", "[platform_keys]") {
  const char* hyperparameters = R"({"sagemaker_distribution_instance_groups": "[\"gpu\"]",
                                    "sagemaker_mpi_enabled": "true"})";
  TempJobDir gpu, data;
  write_heterogeneous_host(gpu, "algo-3", "gpu", hyperparameters);
  write_heterogeneous_host(data, "algo-1", "data", hyperparameters);
  JobDescription on_gpu = load(gpu, Workload::user_command);
  JobDescription on_data = load(data, Workload::user_command);
  for (const JobDescription* job : {&on_gpu, &on_data}) {
    // The toolkit's distribution_hosts: the group's hosts as resourceconfig.json writes them (the same file on
    // every host, so every host agrees), the first of them the master (its master_hostname).
    CHECK(job->cluster.hosts == std::vector<std::string>{"algo-3", "algo-2"});
    CHECK(job->cluster.all_hosts == std::vector<std::string>{"algo-1", "algo-2", "algo-3"});
    CHECK(job->cluster.master_host == "algo-3");
    CHECK(job->world_size() == 2);
  }
  CHECK(on_gpu.cluster.trains_here());
  CHECK_FALSE(on_data.cluster.trains_here());
  CHECK_FALSE(on_data.cluster.is_master());
  const Json shown = describe_effective_configuration(on_data);
  CHECK(shown.at("training_hosts") == Json::array({"algo-3", "algo-2"}));
  CHECK(shown.at("hosts_not_training") == Json::array({"algo-1"}));
  CHECK(shown.at("this_host_trains") == false);
  CHECK(shown.at("training_instance_groups") == Json::array({"gpu"}));
  // The ranks' variables: all hosts, and the distribution's hosts and groups.
  EnvironmentMap variables = sagemaker_variables(on_gpu);
  CHECK(variables.at("SM_HOSTS") == R"(["algo-1","algo-2","algo-3"])");
  CHECK(variables.at("SM_DISTRIBUTION_INSTANCE_GROUPS") == R"(["gpu"])");
  CHECK(variables.at("SM_IS_HETERO") == "true");
  const Json training_env = Json::parse(variables.at("SM_TRAINING_ENV"));
  CHECK(training_env.at("distribution_hosts") == Json::array({"algo-3", "algo-2"}));
  CHECK(training_env.at("master_hostname") == "algo-3");
  CHECK(training_env.at("is_master") == true);

  SECTION("a group the cluster does not have") {
    gpu.add_train_channel();
    gpu.write_config("hyperparameters.json", R"({"sagemaker_distribution_instance_groups": "[\"gpus\"]"})");
    CHECK(config_error_message([&] { load(gpu); }) ==
          "hyperparameter `sagemaker_distribution_instance_groups` names the instance group \"gpus\", but "
          "resourceconfig.json's instance groups are \"data\", \"gpu\"; name groups of the job's heterogeneous "
          "cluster");
  }
  SECTION("not a list of names") {
    gpu.add_train_channel();
    gpu.write_config("hyperparameters.json", R"({"sagemaker_distribution_instance_groups": "[1]"})");
    CHECK(config_error_message([&] { load(gpu); }) ==
          "hyperparameter `sagemaker_distribution_instance_groups`: expected a list of the instance groups that "
          "train, such as [\"gpu_group\"], got [1]");
  }
  SECTION("a cluster without instance groups trains everywhere") {
    TempJobDir plain;
    plain.write_config("resourceconfig.json", two_hosts("algo-2"));
    plain.write_config("hyperparameters.json", hyperparameters);
    JobDescription job = load(plain, Workload::user_command);
    CHECK(job.cluster.hosts == std::vector<std::string>{"algo-1", "algo-2"});
    CHECK(job.cluster.trains_here());
    REQUIRE(job.warnings.size() == 1);
    CHECK(job.warnings[0].find("lists no instance groups; every host trains") != std::string::npos);
  }
  SECTION("the toolkit's distribution groups without the hyperparameter") {
    data.write_config("hyperparameters.json", R"({"sagemaker_mpi_enabled": "true"})");
    CHECK(sagemaker_variables(load(data, Workload::user_command)).at("SM_DISTRIBUTION_INSTANCE_GROUPS") ==
          R"(["data"])");
  }
}

TEST_CASE("output locations: checkpointconfig.json and tensorboardoutputconfig.json", "[platform_keys]") {
  TempJobDir dir;
  dir.add_train_channel();
  JobDescription defaults = load(dir);
  CHECK(defaults.outputs.checkpoints == dir.root() / "checkpoints");
  CHECK(defaults.outputs.tensorboard == dir.root() / "output" / "tensorboard");
  // A LocalPath under /opt/ml follows SAGEMAKER_BASE_DIR; any other is taken as it is.
  dir.write_config("checkpointconfig.json", R"({"LocalPath": "/opt/ml/my-checkpoints", "S3Uri": "s3://b/c"})");
  dir.write_config("tensorboardoutputconfig.json", R"({"LocalPath": "/tmp/tb/", "S3OutputPath": "s3://b/tb"})");
  JobDescription moved = load(dir);
  CHECK(moved.outputs.checkpoints == dir.root() / "my-checkpoints");
  CHECK(moved.outputs.tensorboard == "/tmp/tb/");
  CHECK(describe_effective_configuration(moved).at("checkpoint_dir") == (dir.root() / "my-checkpoints").string());
  dir.write_config("checkpointconfig.json", R"({"S3Uri": "s3://b/c"})");  // no LocalPath: the default
  CHECK(load(dir).outputs.checkpoints == dir.root() / "checkpoints");
  dir.write_config("checkpointconfig.json", R"({"LocalPath": "checkpoints"})");
  dir.write_config("tensorboardoutputconfig.json", R"(["/tmp/tb"])");
  const std::string message = config_error_message([&] { load(dir); });
  CHECK(message.find("checkpointconfig.json: \"LocalPath\": expected an absolute path such as "
                     "\"/opt/ml/checkpoints\", got a string \"checkpoints\"") != std::string::npos);
  CHECK(message.find("tensorboardoutputconfig.json: expected a JSON object such as {\"LocalPath\": ") !=
        std::string::npos);
}

TEST_CASE("output locations: a LocalPath climbing out of /opt/ml cannot lead a relocated job out of its folder",
          "[platform_keys]") {
  // Issue 31: "/opt/ml/checkpoints/../../escape" was normalised to /escape before the SAGEMAKER_BASE_DIR mapping,
  // so a relocated job (this one: its base is a temporary folder) wrote its checkpoints outside its folder.
  TempJobDir dir;
  dir.add_train_channel();
  dir.write_config("checkpointconfig.json", R"({"LocalPath": "/opt/ml/checkpoints/../../escape"})");
  dir.write_config("tensorboardoutputconfig.json", R"({"LocalPath": "/opt/ml/../ml/../../tb"})");
  const std::string message = config_error_message([&] { load(dir); });
  const auto config = dir.root() / "input" / "config";
  CHECK(message == (config / "checkpointconfig.json").string() +
                       ": \"LocalPath\": \"/opt/ml/checkpoints/../../escape\" leads out of /opt/ml through \"..\", "
                       "and this job's /opt/ml is " + dir.root().string() +
                       " (SAGEMAKER_BASE_DIR): name a folder under /opt/ml, or another folder without \"..\"\n" +
                       (config / "tensorboardoutputconfig.json").string() +
                       ": \"LocalPath\": \"/opt/ml/../ml/../../tb\" leads out of /opt/ml through \"..\", and this "
                       "job's /opt/ml is " + dir.root().string() +
                       " (SAGEMAKER_BASE_DIR): name a folder under /opt/ml, or another folder without \"..\"");
  // Where ".." stays inside /opt/ml, or leads into it, the path is mapped as it reads.
  dir.write_config("checkpointconfig.json", R"({"LocalPath": "/opt/ml/checkpoints/../kept//here/."})");
  dir.write_config("tensorboardoutputconfig.json", R"({"LocalPath": "/tmp/../opt/ml/tb"})");
  JobDescription job = load(dir);
  CHECK(job.outputs.checkpoints == dir.root() / "kept" / "here" / "");
  CHECK(job.outputs.tensorboard == dir.root() / "tb");
}

TEST_CASE("heterogeneous clusters: a distribution enabled without its groups trains each host's own group",
          "[platform_keys]") {
  // The toolkit's distribution_instance_groups is then this host's own group: each group is an MPI world of
  // its own, and SM_* says so; train runs the same, and refuses it for its own training (one model each).
  const char* hyperparameters = R"({"sagemaker_mpi_enabled": "true"})";
  TempJobDir gpu, data;
  write_heterogeneous_host(gpu, "algo-2", "gpu", hyperparameters);
  write_heterogeneous_host(data, "algo-1", "data", hyperparameters);
  JobDescription on_gpu = load(gpu, Workload::user_command);
  JobDescription on_data = load(data, Workload::user_command);
  CHECK(on_gpu.cluster.hosts == std::vector<std::string>{"algo-3", "algo-2"});
  CHECK(on_gpu.cluster.master_host == "algo-3");
  CHECK(on_data.cluster.hosts == std::vector<std::string>{"algo-1"});
  CHECK(on_data.cluster.is_master());
  for (const JobDescription* job : {&on_gpu, &on_data}) {
    const Json training_env = Json::parse(sagemaker_variables(*job).at("SM_TRAINING_ENV"));
    CHECK(training_env.at("distribution_hosts") == Json(job->cluster.hosts));
    CHECK(training_env.at("distribution_instance_groups") == Json::array({job->resource_config->current_group_name}));
    CHECK(training_env.at("master_hostname") == job->cluster.master_host);
    CHECK(training_env.at("is_master") == job->cluster.is_master());
  }
  CHECK(on_gpu.warnings.size() == 1);
  CHECK(on_gpu.warnings.front().find("each instance group runs its own MPI world") != std::string::npos);
  const std::string refused = config_error_message([&] { load(gpu); });
  CHECK(refused.find("heterogeneous cluster (instance groups \"data\", \"gpu\") enables a distribution") !=
        std::string::npos);
  CHECK(refused.find("sagemaker_distribution_instance_groups") != std::string::npos);
}
