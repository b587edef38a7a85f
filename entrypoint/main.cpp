// `train`: the ENTRYPOINT of the training container. README.md has the commands, docs/faults.md the exit codes.
#include "common/config_error.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "entrypoint/job_lock.h"
#include "entrypoint/job_report.h"
#include "entrypoint/launcher.h"
#include "entrypoint/multi_host_launch.h"
#include "entrypoint/resource_limits.h"
#include "entrypoint/program_exec.h"
#include "entrypoint/rank_exec.h"
#include "entrypoint/script_mode_launch.h"
#include "entrypoint/shared_memory_sweep.h"
#include "entrypoint/user_code/prepare_code_command.h"
#include "entrypoint/validate_command.h"
#include "job/gpu_inventory.h"
#include "job/hyperparameter_schema.h"
#include "job/job_description.h"
#include "job/sagemaker_environment.h"
#include "job/script_mode.h"
#include "job/train_start.h"
#include "runtime/rank_main.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#ifndef TRAIN_VERSION
#define TRAIN_VERSION "unknown"
#endif

namespace train {
namespace {

constexpr const char* usage_text =
    "usage:\n"
    "  train                  run the job described by /opt/ml (or SAGEMAKER_BASE_DIR), AWS Batch variables,\n"
    "                         or nothing (this host alone)\n"
    "  train train            the same (SageMaker starts images this way); a job that names a program\n"
    "                         (sagemaker_program, SAGEMAKER_PROGRAM) runs it instead: script mode\n"
    "  train -- CMD ARGS...   run CMD on every rank instead of train's own training, with the same environment\n"
    "  train validate [DIR] [-- CMD ARGS...]\n"
    "                         check a job description offline (for CMD's ranks, when given) and print the\n"
    "                         effective configuration\n"
    "  train hyperparameters  print the table of hyperparameters (Markdown)\n"
    "  train --version        print the version\n";

std::string self_path() {
  std::error_code error;
  auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("train") : path.string();
}

// The invalid-job report: the first problem in the first line, all of them below it.
int report_invalid_job(const JobPaths& paths, const std::string& problems) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= problems.size()) {
    size_t end = problems.find('\n', start);
    lines.push_back(problems.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  for (const auto& line : lines) log_error("{}", line);
  std::string summary = fmt::format("The job description is invalid: {}", lines.front());
  std::vector<std::string> rest(lines.begin() + 1, lines.end());
  return report_failure(paths, summary, rest, exit_code::invalid_job);
}

int launch(const std::vector<std::string>& user_command) {
  note_train_start();  // the origin of every start-up phase on this host (runtime/startup_phases.h)
  JobPaths paths = JobPaths::from_environment();
  // One launcher per job directory, for its whole life; a second one touches nothing of the first's.
  JobLockOutcome locked = lock_job_directory(paths, ::getpid(), local_host_name());
  if (locked.refused) {
    log_error("{}", *locked.refused);
    return exit_code::environment;
  }
  // A stdout or stderr whose reader has gone continues in output/train.log: the job goes on.
  set_log_fallback(paths.output() / "train.log");
  log_info("train {} starting (pid {})", TRAIN_VERSION, ::getpid());
  if (locked.warning) log_info("warning: {}", *locked.warning);
  // Before anything can fail: an earlier run's failure file is moved aside, never taken for this run's reason.
  start_job_report(paths);
  if (set_default_path_if_missing()) {
    log_info("warning: PATH is not set: the job's processes get {} (Docker's default)", default_search_path_variable);
  }
  EnvironmentMap environment = current_environment();
  JobDescription job;
  LaunchSettings settings;
  std::optional<ScriptMode> script;
  RunnerChoice runner;
  std::vector<std::string> command = user_command;  // what each rank runs, when not train's own training
  try {
    // A job that names a program runs it (script mode); `train -- CMD` names its own command instead.
    if (user_command.empty()) script = script_mode_of(paths, environment);
    if (script && paths.base.is_relative()) {
      // The launcher and the ranks run in the code folder: a relative job folder would name another folder there.
      paths.base = std::filesystem::absolute(paths.base);
      environment["SAGEMAKER_BASE_DIR"] = paths.base.string();
    }
    const bool own_training = user_command.empty() && !script;
    job = load_job_description(paths, environment, detect_host_resources(), CheckMode::this_host,
                               own_training ? Workload::train_resnet : Workload::user_command);
    if (script) {
      runner = choose_runner(job.hyperparameters.decoded());  // a runner the image cannot serve: refused here
      apply_runner(job, runner);
    }
    settings = launch_settings_from_environment(environment, {});
  } catch (const ConfigError& error) {
    return report_invalid_job(paths, error.what());
  }
  for (const auto& warning : job.warnings) log_info("warning: {}", warning);
  log_info("{} job: host {} of [{}], master {}, {} rank(s) per host, device {}", to_string(job.cluster.platform),
           job.cluster.current_host, fmt::join(job.cluster.hosts, ", "), job.cluster.master_host, job.ranks_per_host,
           device_name(job.device));
  if (script) {
    for (const auto& line : describe_script_mode(job, *script, runner, std::nullopt)) log_info("{}", line);
  }
  // The limits this host's mpirun, sshd and ranks inherit: a soft one too low is raised to the hard one,
  // a hard one too low refused before anything starts.
  const bool own_training = command.empty() && !script;
  const auto checkpoint = own_training ? std::optional<uint64_t>(least_checkpoint_bytes(job)) : std::nullopt;
  if (auto refusal = apply_limits(open_files_need(job), file_size_need(job, checkpoint))) {
    log_error("{}", *refusal);
    return report_failure(paths, *refusal, {}, exit_code::environment);
  }
  // A job killed outright on this host left its shared memory behind (a container's /dev/shm is its own, but
  // a host's may serve job after job).
  remove_stale_shared_memory();
  if (script) {
    // On every host before any rank starts, as the toolkit does: the code fetched and installed.
    try {
      const ScriptLaunch prepared = prepare_script_launch(job, *script, environment);
      command = prepared.command;
      // mpirun runs in the code folder, and so does every rank (Open MPI starts remote ranks in the same folder).
      std::filesystem::current_path(prepared.folder);
    } catch (const user_code::UserCodeError& error) {
      log_error("{}", error.what());
      for (const auto& line : error.details) log_error("{}", line);
      return report_failure(paths, error.what(), error.details, error.exit_code);
    } catch (const ConfigError& error) {
      return report_invalid_job(paths, error.what());
    } catch (const std::filesystem::filesystem_error& error) {
      log_error("{}", error.what());
      return report_failure(paths, fmt::format("train could not enter the code folder: {}", error.what()), {},
                            exit_code::environment);
    }
  }
  settings.rank_program = {self_path()};
  if (own_training) {
    settings.rank_program.push_back("rank");
  } else {
    settings.rank_program.insert(settings.rank_program.end(), {"rank-exec", "--"});
    settings.rank_program.insert(settings.rank_program.end(), command.begin(), command.end());
    std::string arguments = fmt::format("{}", fmt::join(user_command_arguments(job), " "));
    log_info("each rank runs: {}{}{}", fmt::join(command, " "), arguments.empty() ? "" : " ", arguments);
  }
  // Hosts that do not train (instance groups outside the distribution) still wait for the job's end.
  if (job.cluster.all_hosts.size() > 1) return run_multi_host(job, settings, environment);
  return run_launcher(job, settings, environment);
}

int dispatch(const std::vector<std::string>& args) {
  const bool rank = !args.empty() && (args[0] == "rank" || args[0] == "rank-exec");
  // Writing to a stdout or stderr whose reader has gone (`train | head`) is an error to handle, not the end
  // of the launcher. A rank keeps the default: its output goes to mpirun, and without mpirun it is done.
  // (Children get the default back: entrypoint/child_process.cpp.)
  if (!rank) ::signal(SIGPIPE, SIG_IGN);
  if (args.empty() || (args.size() == 1 && args[0] == "train")) return launch({});
  const std::string& command = args[0];
  if (command == "--") {
    if (args.size() < 2) {
      write_line(2, "train --: name the command to run on every rank, e.g. `train -- python3 my_script.py`");
      return exit_code::usage;
    }
    return launch(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (command == "validate") {
    // train validate [DIR] [-- CMD ARGS...]
    auto separator = std::find(args.begin() + 1, args.end(), std::string("--"));
    const size_t directories = static_cast<size_t>(separator - args.begin()) - 1;
    const bool command_given = separator != args.end() && separator + 1 != args.end();
    if (directories <= 1 && (separator == args.end() || command_given)) {
      std::vector<std::string> user_command(separator == args.end() ? args.end() : separator + 1, args.end());
      return run_validate(directories == 1 ? std::optional<std::string>(args[1]) : std::nullopt, user_command);
    }
  }
  if (command == "hyperparameters" && args.size() == 1) {
    std::string table = hyperparameter_table_markdown();
    fmt::print("{}", table);
    return exit_code::success;
  }
  // Script mode's code fetched and installed alone, as the launcher does before the ranks start (for tests).
  if (command == "prepare-code") {
    return user_code::run_prepare_code(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (command == "rank" && args.size() == 1) return run_rank();
  if (command == "rank-exec" && args.size() >= 3 && args[1] == "--") {
    return run_rank_exec(std::vector<std::string>(args.begin() + 2, args.end()));
  }
  if (command == "--version" && args.size() == 1) {
    fmt::print("train {} (CUDA backend: {})\n", TRAIN_VERSION, built_with_cuda() ? "built in" : "not built");
    return exit_code::success;
  }
  if ((command == "--help" || command == "-h" || command == "help") && args.size() == 1) {
    fmt::print("{}", usage_text);
    return exit_code::success;
  }
  std::string given;
  for (const auto& arg : args) given += " " + arg;
  write_line(2, fmt::format("train: unknown command line `train{}`\n{}", given, usage_text));
  return exit_code::usage;
}

}  // namespace
}  // namespace train

int main(int argc, char** argv) {
  try {
    return train::dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& error) {
    train::log_error("internal error: {} (please report this)", error.what());
    return train::exit_code::internal_error;
  }
}
