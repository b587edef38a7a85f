// load_job_description over a real directory: the files SageMaker writes, the host's GPUs and CPUs, and
// every problem reported at once.
#include "common/json_file.h"
#include "common/train_variables.h"
#include "job/job_description.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include <sys/stat.h>

#include <string>
#include <vector>

using namespace train;
using train::testing::config_error_message;
using train::testing::TempJobDir;

namespace {

const HostResources cpu_host{.gpus = 0, .cpus = 8, .gpu_note = "built without CUDA"};
const HostResources gpu_host{.gpus = 8, .cpus = 96};
const HostResources one_gpu_host{.gpus = 1, .cpus = 12};

const char* two_hosts = R"({"current_host": "algo-2", "hosts": ["algo-2", "algo-1"], "network_interface_name": "eth1"})";

// The warnings other than the note that a folder without resourceconfig.json is a one-host local job.
std::vector<std::string> other_warnings(const JobDescription& job) {
  std::vector<std::string> others;
  for (const auto& warning : job.warnings) {
    if (warning.rfind("no resource config found", 0) != 0) others.push_back(warning);
  }
  return others;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += (text.empty() ? "" : "\n") + line;
  return text;
}

// The exact message of the ConfigError that loading the job in `paths` on `host` throws.
std::string load_error(const JobPaths& paths, const HostResources& host, CheckMode mode,
                       const EnvironmentMap& environment = {}) {
  return config_error_message([&] { load_job_description(paths, environment, host, mode); });
}

}  // namespace

TEST_CASE("job description: a folder without resourceconfig.json says it is a one-host local job", "[job_description]") {
  TempJobDir dir;
  dir.write_config("hyperparameters.json", "{}");
  dir.add_train_channel();
  auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host);
  CHECK(job.cluster.platform == JobPlatform::local);
  CHECK(job.warnings == std::vector<std::string>{
      "no resource config found (" + (dir.root() / "input/config/resourceconfig.json").string() + " does not exist): "
      "this is a one-host local job on host \"" + local_host_name() + "\" (its own host name); write "
      "resourceconfig.json (current_host, hosts) for a SageMaker job of several hosts"});
  // With one, nothing to say.
  dir.write_config("resourceconfig.json", R"({"current_host": "algo-1", "hosts": ["algo-1"]})");
  CHECK(load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host).warnings.empty());
}

TEST_CASE("job description: nothing at all is a local run with defaults", "[job_description]") {
  TempJobDir dir;
  // Nothing at all has nothing to train on, and says so before a rank starts.
  CHECK(load_error(dir.paths(), cpu_host, CheckMode::offline) ==
        "the job has no training data: expected a channel named \"train\" (or \"training\") in inputdataconfig.json, "
        "or hyperparameter data_format=synthetic for a benchmark");
  dir.write_config("hyperparameters.json", R"({"data_format": "synthetic"})");
  auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host);
  CHECK(job.cluster.platform == JobPlatform::local);
  CHECK(job.cluster.hosts == std::vector<std::string>{local_host_name()});
  CHECK(job.cluster.is_master());
  CHECK_FALSE(job.resource_config.has_value());
  CHECK(job.device == Device::cpu);
  CHECK(job.precision == Precision::float32);
  CHECK(job.ranks_per_host == 1);
  CHECK(job.world_size() == 1);
  CHECK(job.input.channels.empty());
  CHECK(job.hyperparameters.epochs == 30);
  CHECK(other_warnings(job).empty());
  CHECK(job.resources.cpus == 8);
}

TEST_CASE("job description: a two-host SageMaker job on GPU hosts", "[job_description]") {
  TempJobDir dir;
  dir.write_config("resourceconfig.json", two_hosts);
  dir.write_config("hyperparameters.json", R"({"epochs": "2", "sagemaker_program": "\"train.py\""})");
  dir.write_config("inputdataconfig.json", R"({"train": {"TrainingInputMode": "File"}})");
  dir.make_channel_dir("train");

  auto job = load_job_description(dir.paths(), {}, gpu_host, CheckMode::this_host);
  CHECK(job.cluster.platform == JobPlatform::sagemaker);
  CHECK(job.cluster.hosts == std::vector<std::string>{"algo-1", "algo-2"});
  CHECK(job.cluster.current_host == "algo-2");
  CHECK(job.cluster.master_host == "algo-1");
  CHECK(job.cluster.network_interface == "eth1");
  REQUIRE(job.resource_config.has_value());
  CHECK(job.device == Device::cuda);
  CHECK(job.precision == Precision::bfloat16);
  CHECK(job.ranks_per_host == 8);  // one per GPU
  CHECK(job.world_size() == 16);
  CHECK(job.hyperparameters.epochs == 2);
  REQUIRE(job.input.channels.size() == 1);
  CHECK(job.warnings.empty());

  auto effective = describe_effective_configuration(job);
  CHECK(effective.at("platform") == "SageMaker");
  CHECK(effective.at("hosts") == nlohmann::json::array({"algo-1", "algo-2"}));
  CHECK(effective.at("master_host") == "algo-1");
  CHECK(effective.at("is_master") == false);
  CHECK(effective.at("network_interface") == "eth1");
  CHECK(effective.at("device") == "cuda");
  CHECK(effective.at("gpus_on_this_host") == 8);
  CHECK(effective.at("ranks_per_host") == 8);
  CHECK(effective.at("world_size") == 16);
  CHECK(effective.at("base_dir") == dir.root().string());
  CHECK(effective.at("hyperparameters").at("precision_dtype") == "bfloat16");
  CHECK(effective.at("hyperparameters").at("epochs") == 2);
  CHECK(effective.at("channels") ==
        nlohmann::json::array({{{"name", "train"},
                                {"mode", "File"},
                                {"distribution", "FullyReplicated"},
                                {"record_wrapper", "None"},
                                {"path", (dir.root() / "input/data/train").string()}}}));
  CHECK(effective.at("warnings") == nlohmann::json::array());
}

TEST_CASE("job description: each rank's batch and the buckets' bytes are worked out once", "[job_description]") {
  TempJobDir dir;
  dir.add_train_channel();
  SECTION("the defaults: 256 images per host, 25 MiB buckets") {
    auto job = load_job_description(dir.paths(), {}, gpu_host, CheckMode::this_host);
    CHECK(job.ranks_per_host == 8);
    CHECK(job.batch_per_rank == 32);
    CHECK(job.bucket_bytes == size_t{25} << 20);
  }
  SECTION("mini_batch_size split over processes_per_host; fusion_threshold_mb in bytes") {
    dir.write_config("hyperparameters.json",
                     R"({"mini_batch_size": "96", "processes_per_host": "3", "fusion_threshold_mb": "0.5"})");
    auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host);
    CHECK(job.batch_per_rank == 32);
    CHECK(job.bucket_bytes == 524288);
  }
}

TEST_CASE("job description: device and ranks follow the host", "[job_description]") {
  TempJobDir dir;
  dir.add_train_channel();
  SECTION("auto on a CPU host: one rank, float32") {
    auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host);
    CHECK(job.device == Device::cpu);
    CHECK(job.ranks_per_host == 1);
    CHECK(job.precision == Precision::float32);
  }
  SECTION("processes_per_host on a CPU host") {
    dir.write_config("hyperparameters.json", R"({"processes_per_host": "4"})");
    auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host);
    CHECK(job.device == Device::cpu);
    CHECK(job.ranks_per_host == 4);
  }
  SECTION("the SageMaker alias sets the ranks on a GPU host") {
    dir.write_config("hyperparameters.json", R"({"sagemaker_mpi_num_of_processes_per_host": "4"})");
    auto job = load_job_description(dir.paths(), {}, gpu_host, CheckMode::this_host);
    CHECK(job.device == Device::cuda);
    CHECK(job.ranks_per_host == 4);
  }
  SECTION("device=cpu on a GPU host") {
    dir.write_config("hyperparameters.json", R"({"device": "cpu"})");
    auto job = load_job_description(dir.paths(), {}, gpu_host, CheckMode::this_host);
    CHECK(job.device == Device::cpu);
    CHECK(job.ranks_per_host == 1);
    CHECK(job.precision == Precision::float32);
  }
  SECTION("float32 asked for on a GPU host") {
    dir.write_config("hyperparameters.json", R"({"precision_dtype": "float32"})");
    auto job = load_job_description(dir.paths(), {}, gpu_host, CheckMode::this_host);
    CHECK(job.device == Device::cuda);
    CHECK(job.precision == Precision::float32);
  }
  SECTION("device=cuda on a GPU host") {
    dir.write_config("hyperparameters.json", R"({"device": "cuda"})");
    auto job = load_job_description(dir.paths(), {}, one_gpu_host, CheckMode::this_host);
    CHECK(job.device == Device::cuda);
    CHECK(job.ranks_per_host == 1);
  }
}

TEST_CASE("job description: more ranks than GPUs only with TRAIN_RANKS_SHARE_GPUS=1", "[job_description]") {
  TempJobDir dir;
  dir.add_train_channel();
  dir.write_config("hyperparameters.json", R"({"device": "cuda", "processes_per_host": "2"})");
  CHECK(load_error(dir.paths(), one_gpu_host, CheckMode::this_host) ==
        "hyperparameter `processes_per_host` is 2 but this host has 1 GPU; each rank needs its own GPU, so use at "
        "most 1");
  auto job = load_job_description(dir.paths(), {{"TRAIN_RANKS_SHARE_GPUS", "1"}}, one_gpu_host, CheckMode::this_host);
  CHECK(job.ranks_share_gpus);
  CHECK(job.ranks_per_host == 2);
  CHECK(std::count_if(job.warnings.begin(), job.warnings.end(), [](const std::string& warning) {
          return warning.find("TRAIN_RANKS_SHARE_GPUS=1: 2 ranks share this host's 1 GPU") != std::string::npos;
        }) == 1);
  CHECK(config_error_message([&] {
          load_job_description(dir.paths(), {{"TRAIN_RANKS_SHARE_GPUS", "yes"}}, one_gpu_host, CheckMode::this_host);
        }).find("environment variable TRAIN_RANKS_SHARE_GPUS: expected 0 or 1, got \"yes\"") != std::string::npos);
}

TEST_CASE("job description: device=cuda without a GPU", "[job_description]") {
  TempJobDir dir;
  dir.add_train_channel();
  dir.write_config("hyperparameters.json", R"({"device": "cuda"})");
  const std::string message =
      "hyperparameter `device` is \"cuda\" but this host has no usable GPU (built without CUDA); use device=auto or "
      "device=cpu, or run on a GPU instance";
  SECTION("is an error on the host that runs the job") {
    CHECK(load_error(dir.paths(), cpu_host, CheckMode::this_host) == message);
  }
  SECTION("is a warning when validating offline") {
    auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::offline);
    CHECK(other_warnings(job) == std::vector<std::string>{message + " (on the machine that ran `train validate`)"});
  }
  SECTION("with bfloat16 it is still the one warning offline") {
    dir.write_config("hyperparameters.json", R"({"device": "cuda", "precision_dtype": "bfloat16"})");
    auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::offline);
    CHECK(other_warnings(job) == std::vector<std::string>{message + " (on the machine that ran `train validate`)"});
  }
}

TEST_CASE("job description: ranks that do not fit the host or the batch", "[job_description]") {
  TempJobDir dir;
  dir.add_train_channel();
  SECTION("mini_batch_size not divisible by the GPUs") {
    dir.write_config("hyperparameters.json", R"({"mini_batch_size": "100"})");
    const std::string message =
        "hyperparameter `mini_batch_size` is 100 but it is split evenly over the 8 ranks of each host; use a multiple "
        "of 8";
    CHECK(load_error(dir.paths(), gpu_host, CheckMode::this_host) == message);
    // Not a matter of the host: an error offline too.
    CHECK(load_error(dir.paths(), gpu_host, CheckMode::offline) == message);
  }
  SECTION("mini_batch_size not divisible by processes_per_host") {
    dir.write_config("hyperparameters.json", R"({"mini_batch_size": "10", "processes_per_host": "4"})");
    CHECK(load_error(dir.paths(), cpu_host, CheckMode::this_host) ==
          "hyperparameter `mini_batch_size` is 10 but it is split evenly over the 4 ranks of each host; use a "
          "multiple of 4");
  }
  SECTION("more processes than GPUs") {
    dir.write_config("hyperparameters.json", R"({"processes_per_host": "16"})");
    const std::string message =
        "hyperparameter `processes_per_host` is 16 but this host has 8 GPUs; each rank needs its own GPU, so use at "
        "most 8";
    CHECK(load_error(dir.paths(), gpu_host, CheckMode::this_host) == message);
    auto job = load_job_description(dir.paths(), {}, gpu_host, CheckMode::offline);
    CHECK(other_warnings(job) == std::vector<std::string>{message + " (on the machine that ran `train validate`)"});
  }
  SECTION("two processes on one GPU") {
    dir.write_config("hyperparameters.json", R"({"processes_per_host": "2"})");
    CHECK(load_error(dir.paths(), one_gpu_host, CheckMode::this_host) ==
          "hyperparameter `processes_per_host` is 2 but this host has 1 GPU; each rank needs its own GPU, so use at "
          "most 1");
  }
}

TEST_CASE("job description: bfloat16 on the CPU", "[job_description]") {
  TempJobDir dir;
  dir.add_train_channel();
  const std::string message =
      "hyperparameter `precision_dtype` is \"bfloat16\" but training runs on the CPU, which trains in float32; remove "
      "precision_dtype or set it to float32";
  SECTION("device=auto on a CPU host: an error here, a warning offline") {
    dir.write_config("hyperparameters.json", R"({"precision_dtype": "bfloat16"})");
    CHECK(load_error(dir.paths(), cpu_host, CheckMode::this_host) == message);
    auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::offline);
    CHECK(other_warnings(job) == std::vector<std::string>{message + " (on the machine that ran `train validate`)"});
    // On a GPU host the same file is fine.
    CHECK(load_job_description(dir.paths(), {}, gpu_host, CheckMode::this_host).precision == Precision::bfloat16);
  }
  SECTION("device=cpu: wrong on every host, so an error offline too") {
    dir.write_config("hyperparameters.json", R"({"precision_dtype": "bfloat16", "device": "cpu"})");
    CHECK(load_error(dir.paths(), gpu_host, CheckMode::this_host) == message);
    CHECK(load_error(dir.paths(), gpu_host, CheckMode::offline) == message);
  }
}

TEST_CASE("job description: every problem is reported at once, one per line", "[job_description]") {
  TempJobDir dir;
  const auto paths = dir.paths();
  dir.write_config("resourceconfig.json", R"({"current_host": "algo-3", "hosts": ["algo-1", "algo-2"]})");
  dir.write_config("hyperparameters.json", R"({"epochs": "many", "optimizer": "adamw", "mini_batch_size": "7"})");
  dir.write_config("inputdataconfig.json", R"({"../train": {"TrainingInputMode": "File"}})");
  const EnvironmentMap environment = {{"TRAIN_NETWORK_INTERFACE", "eth0/1"}};
  CHECK(load_error(paths, gpu_host, CheckMode::this_host, environment) ==
        joined({
            paths.resource_config().string() +
                ": \"current_host\" \"algo-3\" is not one of \"hosts\" [\"algo-1\",\"algo-2\"]; it must be listed "
                "there",
            "environment variable TRAIN_NETWORK_INTERFACE: expected an interface name such as \"eth0\", got "
            "\"eth0/1\"",
            paths.hyperparameters().string() + ": hyperparameter `epochs`: expected a positive integer, got \"many\"",
            paths.hyperparameters().string() +
                ": hyperparameter `optimizer`: expected one of sgd, nag or lars, got \"adamw\"",
            paths.input_data_config().string() +
                ": channel name \"../train\" is not allowed: use 1-64 letters, digits, '.', '-' or '_' (it becomes a "
                "directory under input/data)",
        }));

  SECTION("with valid hyperparameters the host checks join in") {
    dir.write_config("hyperparameters.json", R"({"mini_batch_size": "7"})");
    CHECK(load_error(paths, gpu_host, CheckMode::this_host, environment) ==
          joined({
              paths.resource_config().string() +
                  ": \"current_host\" \"algo-3\" is not one of \"hosts\" [\"algo-1\",\"algo-2\"]; it must be listed "
                  "there",
              "environment variable TRAIN_NETWORK_INTERFACE: expected an interface name such as \"eth0\", got "
              "\"eth0/1\"",
              paths.input_data_config().string() +
                  ": channel name \"../train\" is not allowed: use 1-64 letters, digits, '.', '-' or '_' (it becomes "
                  "a directory under input/data)",
              "hyperparameter `mini_batch_size` is 7 but it is split evenly over the 8 ranks of each host; use a "
              "multiple of 8",
              "hyperparameter `mini_batch_size` gives each of the 8 ranks per host 0 images; batch norm needs at "
              "least 2 per rank, so use at least 16",
          }));
  }
}

TEST_CASE("job description: what train's own training needs, all at once before a rank starts", "[job_description]") {
  // These were found by the ranks after mpirun had started them all; `train validate` could not see them.
  TempJobDir dir;
  dir.write_config("hyperparameters.json", R"({"data_format": "image_folder", "mini_batch_size": "3",
                                               "processes_per_host": "3"})");
  dir.write_config("inputdataconfig.json", R"({"train": {"TrainingInputMode": "Pipe"},
                                              "validation": {"TrainingInputMode": "Pipe"}})");
  const std::string expected = joined({
      "channel \"train\" uses Pipe mode, which streams TFRecord or RecordIO objects, but hyperparameter data_format "
      "is \"image_folder\": use auto, tfrecord or recordio, or File mode",
      "channel \"train\" uses Pipe mode, where the data is a stream that train sees only as it trains; set the "
      "hyperparameters num_training_samples (records per epoch across the job) and num_classes (as for SageMaker's "
      "built-in image classification algorithm)",
      "channel \"validation\" uses Pipe mode; train reads validation data in File or FastFile mode only (it is read "
      "whole every epoch): set its TrainingInputMode to File or FastFile",
      "hyperparameter `mini_batch_size` gives each of the 3 ranks per host 1 image; batch norm needs at least 2 per "
      "rank, so use at least 6",
  });
  CHECK(load_error(dir.paths(), cpu_host, CheckMode::this_host) == expected);
  // Not a matter of the host: the same problems offline (`train validate`).
  CHECK(load_error(dir.paths(), cpu_host, CheckMode::offline) == expected);
  // A user's command reads its own data: none of this applies to it.
  CHECK(load_job_description(dir.paths(), {}, cpu_host, CheckMode::offline, Workload::user_command).ranks_per_host == 3);

  SECTION("one count missing is named alone") {
    dir.write_config("hyperparameters.json", R"({"num_classes": "10"})");
    dir.write_config("inputdataconfig.json", R"({"training": {"TrainingInputMode": "Pipe"}})");
    CHECK(load_error(dir.paths(), cpu_host, CheckMode::offline) ==
          "channel \"training\" uses Pipe mode, where the data is a stream that train sees only as it trains; set the "
          "hyperparameter num_training_samples (records per epoch across the job) (as for SageMaker's built-in image "
          "classification algorithm)");
  }
  SECTION("a Pipe job with what it needs is valid") {
    dir.write_config("hyperparameters.json", R"({"num_classes": "10", "num_training_samples": "1000",
                                                 "data_format": "tfrecord"})");
    dir.write_config("inputdataconfig.json", R"({"train": {"TrainingInputMode": "Pipe"}})");
    CHECK(load_job_description(dir.paths(), {}, cpu_host, CheckMode::offline).input.channels.size() == 1);
  }
}

TEST_CASE("job description: nonsense TRAIN_* values are refused with the job's other problems", "[job_description]") {
  TempJobDir dir;
  dir.add_train_channel();
  const EnvironmentMap environment = {{"TRAIN_STEP_TIMEOUT_SECONDS", "0"},   // every step would time out
                                      {"TRAIN_DATA_TIMEOUT_SECONDS", "10s"},
                                      {"TRAIN_PEERS_TIMEOUT_SECONDS", "-5"},
                                      {"TRAIN_SSH_PORT", "70000"},
                                      {"TRAIN_SHARED_GRADIENT_BUFFERS", "yes"},
                                      {"TRAIN_STRAGGLER_FACTOR", "1"},
                                      // 0 means "not at all" for these two, and is fine.
                                      {"TRAIN_STOP_GRACE_SECONDS", "0"},
                                      {"TRAIN_MASTER_LINGER_SECONDS", "0"}};
  const std::string expected = joined({
      "environment variable TRAIN_STEP_TIMEOUT_SECONDS: expected a whole number of seconds from 1 to 9999999 such as "
      "900, got \"0\"",
      "environment variable TRAIN_DATA_TIMEOUT_SECONDS: expected a whole number of seconds from 1 to 9999999 such as "
      "600, got \"10s\"",
      "environment variable TRAIN_PEERS_TIMEOUT_SECONDS: expected a whole number of seconds from 1 to 864000 such as "
      "600, got \"-5\"",
      "environment variable TRAIN_SSH_PORT: expected a whole number from 1 to 65535 such as 22, got \"70000\"",
      "environment variable TRAIN_SHARED_GRADIENT_BUFFERS: expected 0 or 1, got \"yes\"; unset it for the reference "
      "path",
      "environment variable TRAIN_STRAGGLER_FACTOR: expected a number above 1 and at most 1000 such as 1.5, got \"1\"",
  });
  CHECK(load_error(dir.paths(), cpu_host, CheckMode::offline, environment) == expected);
  // The same for a user's command: the launcher reads them too.
  CHECK(config_error_message([&] {
          load_job_description(dir.paths(), environment, cpu_host, CheckMode::this_host, Workload::user_command);
        }) == expected);
  // Every timeout refuses 0; the stop grace and the master's linger take it.
  for (const auto& variable : checked_train_variables()) {
    const std::string name(variable.name);
    if (name == "TRAIN_SHARED_GRADIENT_BUFFERS" || name == "TRAIN_RANKS_SHARE_GPUS") continue;  // flags: 0 is off
    INFO(name);
    const bool zero_allowed = name == "TRAIN_STOP_GRACE_SECONDS" || name == "TRAIN_MASTER_LINGER_SECONDS";
    CHECK(train_variable_problems({{name, "0"}}).empty() == zero_allowed);
    CHECK(train_variable_problems({{name, variable.default_text}}).empty());
  }
}

TEST_CASE("job description: TRAIN_FAST_PATH, the former name of TRAIN_SHARED_GRADIENT_BUFFERS, is still read",
          "[job_description]") {
  CHECK(read_flag_variable({{"TRAIN_FAST_PATH", "1"}}, FlagVariable::shared_gradient_buffers));
  CHECK_FALSE(read_flag_variable({{"TRAIN_FAST_PATH", "0"}}, FlagVariable::shared_gradient_buffers));
  // The new name wins when both are set; a bad value is named by the variable it came from.
  CHECK_FALSE(read_flag_variable({{"TRAIN_SHARED_GRADIENT_BUFFERS", "0"}, {"TRAIN_FAST_PATH", "1"}},
                                 FlagVariable::shared_gradient_buffers));
  CHECK(train_variable_problems({{"TRAIN_FAST_PATH", "yes"}}) ==
        std::vector<std::string>{"environment variable TRAIN_FAST_PATH: expected 0 or 1, got \"yes\"; unset it for "
                                 "the reference path"});
  // The launcher hands the ranks the new name too, so that only the launcher says the old one is deprecated.
  EnvironmentMap ranks{{"TRAIN_FAST_PATH", "1"}, {"OTHER", "x"}};
  add_new_names_of_former_variables(ranks);
  CHECK(ranks == EnvironmentMap{{"TRAIN_FAST_PATH", "1"}, {"TRAIN_SHARED_GRADIENT_BUFFERS", "1"}, {"OTHER", "x"}});
  EnvironmentMap both{{"TRAIN_FAST_PATH", "1"}, {"TRAIN_SHARED_GRADIENT_BUFFERS", "0"}};
  add_new_names_of_former_variables(both);
  CHECK(both.at("TRAIN_SHARED_GRADIENT_BUFFERS") == "0");
  EnvironmentMap neither{{"OTHER", "x"}};
  add_new_names_of_former_variables(neither);
  CHECK(neither == EnvironmentMap{{"OTHER", "x"}});
}

TEST_CASE("job description: broken files", "[job_description]") {
  TempJobDir dir;
  dir.add_train_channel();
  const auto paths = dir.paths();
  SECTION("an empty resourceconfig.json") {
    dir.write_config("resourceconfig.json", "");
    CHECK(load_error(paths, cpu_host, CheckMode::this_host) ==
          paths.resource_config().string() +
              ": not valid JSON (parse error at line 1, column 1: syntax error while parsing value - unexpected end of "
              "input; expected '[', '{', or a literal); fix the file so that it is one UTF-8 JSON object");
  }
  SECTION("a resourceconfig.json too large to be one") {
    dir.write_config("resourceconfig.json", std::string(max_config_file_bytes + 1, ' '));
    CHECK(load_error(paths, cpu_host, CheckMode::this_host) ==
          paths.resource_config().string() + ": larger than 4194304 bytes; this is not a job description file");
  }
  SECTION("hyperparameters.json with a byte that is not UTF-8") {
    dir.write_config("hyperparameters.json", "{\"optimizer\": \"n\xe4g\"}");
    CHECK(load_error(paths, cpu_host, CheckMode::this_host) ==
          paths.hyperparameters().string() +
              ": not valid JSON (parse error at line 1, column 18: syntax error while parsing value - invalid string: "
              "ill-formed UTF-8 byte; last read: '\"n\\xE4g'); fix the file so that it is one UTF-8 JSON object");
  }
  SECTION("a directory where a file should be") {
    std::filesystem::remove(paths.input_data_config());
    std::filesystem::create_directories(paths.input_data_config());
    CHECK(load_error(paths, cpu_host, CheckMode::this_host) ==
          paths.input_data_config().string() +
              ": expected a regular file holding JSON, found a directory; replace it with the file");
  }
  SECTION("a FIFO where a file should be: refused at once, not waited on for a writer") {
    std::filesystem::create_directories(paths.config_dir());
    std::filesystem::remove(paths.hyperparameters());
    REQUIRE(::mkfifo(paths.hyperparameters().c_str(), 0600) == 0);
    CHECK(load_error(paths, cpu_host, CheckMode::this_host) ==
          paths.hyperparameters().string() +
              ": expected a regular file holding JSON, found a FIFO (named pipe); replace it with the file");
  }
}

TEST_CASE("job description: AWS Batch when there is no resourceconfig.json", "[job_description]") {
  TempJobDir dir;
  dir.add_train_channel();
  EnvironmentMap environment = {{"AWS_BATCH_JOB_NUM_NODES", "2"},
                                {"AWS_BATCH_JOB_NODE_INDEX", "1"},
                                {"AWS_BATCH_JOB_MAIN_NODE_INDEX", "0"},
                                {"AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", "10.1.2.3"},
                                {"AWS_BATCH_JOB_ID", "9f1e2d3c#1"},
                                {"TRAIN_NETWORK_INTERFACE", "ens5"}};
  auto job = load_job_description(dir.paths(), environment, gpu_host, CheckMode::this_host);
  CHECK(job.cluster.platform == JobPlatform::aws_batch);
  CHECK(job.cluster.hosts == std::vector<std::string>{"node-0", "node-1"});
  CHECK(job.cluster.current_host == "node-1");
  CHECK_FALSE(job.cluster.is_master());
  CHECK(job.cluster.network_interface == "ens5");
  CHECK(job.world_size() == 16);

  environment.erase("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS");
  CHECK(load_error(dir.paths(), gpu_host, CheckMode::this_host, environment) ==
        "environment variable AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS: expected the main node's IPv4 address (AWS "
        "Batch sets it on child nodes), got nothing");

  // A resourceconfig.json wins over Batch variables.
  dir.write_config("resourceconfig.json", R"({"current_host": "algo-1", "hosts": ["algo-1"]})");
  CHECK(load_job_description(dir.paths(), environment, gpu_host, CheckMode::this_host).cluster.platform ==
        JobPlatform::sagemaker);
}

TEST_CASE("job description: channels without their directory are warnings", "[job_description]") {
  TempJobDir dir;
  dir.write_config("inputdataconfig.json", R"({"train": {}, "validation": {"TrainingInputMode": "FastFile"},
                                              "stream": {"TrainingInputMode": "Pipe"}})");
  dir.make_channel_dir("train");
  auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host);
  CHECK(other_warnings(job) == std::vector<std::string>{"channel \"validation\" (FastFile mode) has no directory " +
                                                 (dir.root() / "input/data/validation").string() + " yet"});
}
