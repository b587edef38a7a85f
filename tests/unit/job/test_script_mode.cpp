// Script mode: which program a job names, and the runner its distribution keys choose (as the toolkit reads them).
#include "job/script_mode.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

using namespace train;
using train::testing::TempJobDir;
using Json = nlohmann::json;

TEST_CASE("script mode: the program from sagemaker_program, and SAGEMAKER_PROGRAM wins", "[script_mode]") {
  TempJobDir dir;
  CHECK_FALSE(script_mode_of(dir.paths(), {}));  // no file, no variable: train's own training
  dir.write_config("hyperparameters.json",
                   R"({"sagemaker_program": "\"user.py\"", "sagemaker_submit_directory": "\"s3://b/k.tar.gz\""})");
  auto script = script_mode_of(dir.paths(), {});
  REQUIRE(script);
  CHECK(script->program == "user.py");
  CHECK(script->submit_directory == "s3://b/k.tar.gz");
  CHECK(script->named_by == "hyperparameter `sagemaker_program`");
  script = script_mode_of(dir.paths(), {{"SAGEMAKER_PROGRAM", "other.py"}});
  REQUIRE(script);
  CHECK(script->program == "other.py");
  CHECK(script->named_by == "the SAGEMAKER_PROGRAM variable");
  CHECK(script->submit_directory == "s3://b/k.tar.gz");  // the hyperparameter wins, as in the toolkit
}

TEST_CASE("script mode: a sagemaker_program that is not a string is refused", "[script_mode]") {
  TempJobDir dir;
  dir.write_config("hyperparameters.json", R"({"sagemaker_program": "[1, 2]"})");
  const std::string message = train::testing::config_error_message([&] { script_mode_of(dir.paths(), {}); });
  CHECK(message.find("sagemaker_program") != std::string::npos);
  CHECK(message.find("[1,2]") != std::string::npos);
}

TEST_CASE("script mode: the runner from the distribution keys, in the PyTorch toolkit's order", "[script_mode]") {
  CHECK(choose_runner(Json::object()).runner == ScriptRunner::single_process);
  CHECK(choose_runner(Json{{"sagemaker_mpi_enabled", false}}).runner == ScriptRunner::single_process);
  CHECK(choose_runner(Json{{"sagemaker_mpi_enabled", true}}).runner == ScriptRunner::mpi);
  CHECK(choose_runner(Json{{"sagemaker_torch_distributed_enabled", true}}).runner == ScriptRunner::torch_distributed);
  CHECK(choose_runner(Json{{"sagemaker_pytorch_ddp_enabled", "yes"}}).runner == ScriptRunner::pytorch_ddp);
  CHECK(choose_runner(Json{{"sagemaker_mpi_enabled", 1}, {"sagemaker_torch_distributed_enabled", true}}).runner ==
        ScriptRunner::mpi);
}

TEST_CASE("script mode: what the image cannot serve is refused, saying what to use", "[script_mode]") {
  for (const char* key : {"sagemaker_distributed_dataparallel_enabled", "sagemaker_parameter_server_enabled",
                          "sagemaker_multi_worker_mirrored_strategy_enabled",
                          "sagemaker_pytorch_xla_multi_worker_enabled"}) {
    const std::string message = train::testing::config_error_message([&] { choose_runner(Json{{key, true}}); });
    CHECK(message.find(key) != std::string::npos);
    CHECK(message.find("use ") != std::string::npos);
  }
  const std::string model_parallel = train::testing::config_error_message(
      [] { choose_runner(Json{{"sagemaker_mpi_enabled", true}, {"mp_parameters", {{"partitions", 2}}}}); });
  CHECK(model_parallel.find("model parallel") != std::string::npos);
  CHECK(choose_runner(Json{{"sagemaker_distributed_dataparallel_enabled", false}}).runner ==
        ScriptRunner::single_process);
}

TEST_CASE("script mode: train's own settings that a job sets are named", "[script_mode]") {
  const auto keys = own_training_keys(Json{{"epochs", 3}, {"my_flag", 1}, {"processes_per_host", 2}});
  CHECK(keys == std::vector<std::string>{"epochs"});
}
