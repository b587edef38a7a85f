#include "entrypoint/user_code/user_code.h"

#include "common/exit_codes.h"
#include "common/log.h"
#include "common/train_variables.h"
#include "entrypoint/user_code/code_fetch.h"
#include "entrypoint/user_code/code_folder.h"
#include "entrypoint/user_code/code_install.h"
#include "entrypoint/user_code/code_source.h"

#include <fmt/format.h>

#include <system_error>

namespace train::user_code {

namespace {

// Debian's (and Ubuntu's) python3, for which python3-boto3 is packaged: the fetcher's interpreter even where
// PATH leads to another python3 (a conda or pyenv one without boto3).
constexpr const char* distribution_python = "/usr/bin/python3";

void make_executable(const std::filesystem::path& program) {
  std::error_code error;
  std::filesystem::permissions(program,
                               std::filesystem::perms::owner_exec | std::filesystem::perms::group_exec |
                                   std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add, error);
  if (error) log_info("warning: cannot make {} executable: {}", program.string(), error.message());
}

}  // namespace

CodeSettings code_settings_from_environment(const EnvironmentMap& environment) {
  CodeSettings settings;
  settings.fetch_timeout = read_seconds_variable(environment, IntegerVariable::code_fetch_timeout_seconds);
  settings.install_timeout = read_seconds_variable(environment, IntegerVariable::code_install_timeout_seconds);
  std::error_code error;
  settings.fetch_python = std::filesystem::exists(distribution_python, error) ? distribution_python : "python3";
  settings.environment = environment;
  return settings;
}

PreparedCode prepare_user_code(const JobPaths& paths, const CodeRequest& request, const CodeSettings& settings) {
  // The name first: before anything is fetched or installed (the toolkit's order).
  if (auto problem = program_name_problem(request.program)) {
    throw UserCodeError(exit_code::invalid_job, fmt::format("The job's program cannot be run: {}.", *problem));
  }
  PreparedCode prepared;
  prepared.folder = paths.code();
  const CodeSource source = classify_code_source(request.submit_directory, paths);
  if (source.kind == SourceKind::code_folder) {
    prepared.done.push_back(fmt::format("the code is the code folder {} itself: nothing to fetch",
                                        prepared.folder.string()));
  } else if (holds_code(prepared.folder)) {
    // As the toolkit: a code folder that holds anything is the code, whatever the job names.
    prepared.done.push_back(fmt::format("the code folder {} already holds code: {} was not fetched",
                                        prepared.folder.string(), source.given));
  } else {
    log_info("code: fetching {} into {}", source.given, prepared.folder.string());
    prepared.done.push_back(fetch_code(source, prepared.folder, settings));
  }
  log_info("code: {}", prepared.done.back());

  if (auto missing = program_missing(prepared.folder, request.program)) {
    throw UserCodeError(exit_code::invalid_job, fmt::format("The job's program cannot be run: {}.", *missing));
  }
  prepared.kind = program_kind(prepared.folder, request.program);
  if (prepared.kind == ProgramKind::command) make_executable(prepared.folder / request.program);
  const auto command = install_command(prepared.folder, prepared.kind, settings.python);
  prepared.done.push_back(command.empty() ? fmt::format("{} is {}: nothing to install", request.program,
                                                        to_string(prepared.kind))
                                          : fmt::format("{} is {}: {}", request.program, to_string(prepared.kind),
                                                        install_code(command, prepared.folder, settings)));
  log_info("code: {}", prepared.done.back());
  return prepared;
}

}  // namespace train::user_code
