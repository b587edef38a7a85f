#include "entrypoint/user_code/prepare_code_command.h"

#include "common/config_error.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "entrypoint/job_report.h"
#include "entrypoint/signal_inbox.h"
#include "entrypoint/user_code/user_code.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <csignal>

namespace train::user_code {

int run_prepare_code(const std::vector<std::string>& arguments) {
  if (arguments.size() != 2) {
    write_line(2, "usage: train prepare-code SUBMIT_DIRECTORY PROGRAM (SUBMIT_DIRECTORY \"\" for the code folder)");
    return exit_code::usage;
  }
  const JobPaths paths = JobPaths::from_environment();
  SignalInbox inbox;
  CodeSettings settings;
  try {
    settings = code_settings_from_environment(current_environment());
  } catch (const ConfigError& error) {
    log_error("{}", error.what());
    return report_failure(paths, fmt::format("The job description is invalid: {}", error.what()), {},
                          exit_code::invalid_job);
  }
  settings.stop_signal = [&inbox]() -> std::optional<int> {
    while (auto signal_number = inbox.take()) {
      if (*signal_number != SIGCHLD && *signal_number != SIGUSR2) return signal_number;
    }
    return std::nullopt;
  };
  try {
    const PreparedCode prepared = prepare_user_code(paths, CodeRequest{arguments[0], arguments[1]}, settings);
    nlohmann::json result = {
        {"folder", prepared.folder.string()}, {"kind", kind_name(prepared.kind)}, {"done", prepared.done}};
    write_line(1, result.dump());
    return exit_code::success;
  } catch (const UserCodeError& error) {
    log_error("{}", error.what());
    return report_failure(paths, error.what(), error.details, error.exit_code);
  }
}

}  // namespace train::user_code
