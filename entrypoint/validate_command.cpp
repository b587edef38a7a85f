#include "entrypoint/validate_command.h"

#include "common/config_error.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "job/job_description.h"
#include "entrypoint/script_mode_launch.h"
#include "entrypoint/user_code/entry_point.h"
#include "job/sagemaker_environment.h"
#include "job/script_mode.h"

#include <fmt/format.h>

#include <filesystem>

namespace train {

int run_validate(const std::optional<std::string>& dir, const std::vector<std::string>& user_command) {
  JobPaths paths = JobPaths::from_environment();
  if (dir) {
    std::filesystem::path given(*dir);
    std::error_code error;
    if (std::filesystem::is_directory(given / "input" / "config", error)) {
      paths.base = given;
    } else if (std::filesystem::exists(given / "hyperparameters.json", error) ||
               std::filesystem::exists(given / "resourceconfig.json", error) ||
               std::filesystem::exists(given / "inputdataconfig.json", error)) {
      paths.base = given.parent_path().parent_path();
      paths.config_override = given;
    } else {
      write_line(2, fmt::format("train validate: {} holds neither input/config/ nor any of hyperparameters.json, "
                                "resourceconfig.json, inputdataconfig.json; give the job's /opt/ml-like directory "
                                "or its input/config directory",
                                given.string()));
      return exit_code::usage;
    }
  }
  try {
    const EnvironmentMap environment = current_environment();
    const auto script = user_command.empty() ? script_mode_of(paths, environment) : std::nullopt;
    JobDescription job =
        load_job_description(paths, environment, detect_host_resources(), CheckMode::offline,
                             user_command.empty() && !script ? Workload::train_resnet : Workload::user_command);
    std::vector<std::string> command = user_command;
    std::vector<std::string> script_lines;
    if (script) {
      const RunnerChoice runner = choose_runner(job.hyperparameters.decoded());
      apply_runner(job, runner);
      std::optional<user_code::ProgramKind> kind;  // known when the code is already in the code folder
      if (!user_code::program_name_problem(script->program) && !user_code::program_missing(job.paths.code(), script->program)) {
        kind = user_code::program_kind(job.paths.code(), script->program);
        command = script_command(*kind, script->program, "python3");
      }
      script_lines = describe_script_mode(job, *script, runner, kind);
    }
    nlohmann::json description = describe_effective_configuration(job);
    if (script) {
      description["script_mode"] = {{"program", script->program}, {"named_by", script->named_by},
                                    {"submit_directory", script->submit_directory}, {"chosen", script_lines}};
    }
    if (!command.empty()) {
      std::vector<std::string> rank_command = command;
      for (auto& argument : user_command_arguments(job)) rank_command.push_back(std::move(argument));
      description["rank_command"] = rank_command;
    }
    write_line(1, description.dump(2));
    for (const auto& warning : job.warnings) write_line(2, "warning: " + warning);
    write_line(2, fmt::format("job description in {} is valid", paths.config_dir().string()));
    return exit_code::success;
  } catch (const ConfigError& error) {
    std::string message = error.what();
    size_t count = 1 + static_cast<size_t>(std::count(message.begin(), message.end(), '\n'));
    write_line(2, fmt::format("job description in {} has {} problem{}:", paths.config_dir().string(), count,
                              count == 1 ? "" : "s"));
    write_line(2, message);
    return exit_code::invalid_job;
  }
}

}  // namespace train
