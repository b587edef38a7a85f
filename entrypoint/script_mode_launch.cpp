#include "entrypoint/script_mode_launch.h"

#include "common/log.h"
#include "entrypoint/signal_inbox.h"

#include <fmt/format.h>

#include <csignal>

namespace train {

std::vector<std::string> script_command(user_code::ProgramKind kind, const std::string& program,
                                        const std::string& python) {
  switch (kind) {
    case user_code::ProgramKind::python_package: {
      const bool py = program.size() > 3 && program.compare(program.size() - 3, 3, ".py") == 0;
      return {python, "-m", py ? program.substr(0, program.size() - 3) : program};
    }
    case user_code::ProgramKind::python_program: return {python, "--", program};
    case user_code::ProgramKind::command: return {"./" + program};
  }
  return {program};
}

std::vector<std::string> describe_script_mode(const JobDescription& job, const ScriptMode& script,
                                              const RunnerChoice& runner,
                                              const std::optional<user_code::ProgramKind>& kind) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format("script mode: the program is {} (named by {}), from {}", script.program, script.named_by,
                              script.submit_directory.empty() ? std::string("the code folder")
                                                              : script.submit_directory));
  if (kind) {
    lines.push_back(fmt::format("script mode: {} is {}, run as `{}` in {}", script.program, user_code::to_string(*kind),
                                fmt::join(script_command(*kind, script.program, "python3"), " "),
                                job.paths.code().string()));
  } else {
    lines.push_back(fmt::format("script mode: how {} runs is decided once its code is in {}", script.program,
                                job.paths.code().string()));
  }
  lines.push_back(fmt::format("script mode: runner {} ({}): {} rank{} per host on [{}], {} in all", to_string(runner.runner),
                              runner.because, job.ranks_per_host, job.ranks_per_host == 1 ? "" : "s",
                              fmt::join(job.cluster.hosts, ", "), job.world_size()));
  const auto own = own_training_keys(job.hyperparameters.decoded());
  if (!own.empty()) {
    lines.push_back(fmt::format("script mode: train's own ResNet training does not run, so its settings [{}] only "
                                "reach the program, as arguments and SM_HP_* variables",
                                fmt::join(own, ", ")));
  }
  return lines;
}

ScriptLaunch prepare_script_launch(const JobDescription& job, const ScriptMode& script,
                                   const EnvironmentMap& environment) {
  user_code::CodeSettings settings = user_code::code_settings_from_environment(environment);
  SignalInbox inbox;  // for the preparation alone: the launcher's own takes over after it
  settings.stop_signal = [&inbox]() -> std::optional<int> {
    while (auto signal_number = inbox.take()) {
      if (*signal_number != SIGCHLD && *signal_number != SIGUSR2) return signal_number;
    }
    return std::nullopt;
  };
  const auto prepared =
      user_code::prepare_user_code(job.paths, user_code::CodeRequest{script.submit_directory, script.program}, settings);
  return ScriptLaunch{prepared.folder, script_command(prepared.kind, script.program, settings.python), prepared.done};
}

}  // namespace train
