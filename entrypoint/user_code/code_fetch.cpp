#include "entrypoint/user_code/code_fetch.h"

#include "common/exit_codes.h"
#include "common/log.h"
#include "common/signal_sender.h"
#include "entrypoint/child_process.h"
#include "entrypoint/user_code/code_folder.h"
#include "entrypoint/user_code/fetch_code_source.h"
#include "entrypoint/user_code/streamed_command.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <deque>
#include <map>

namespace train::user_code {

namespace {

constexpr size_t kept_lines = 20;  // of the fetcher's log, for the report

// fetch_code.py's refusals and their exit codes: the job's own (65), the machine's (74), the image's (69).
int exit_code_of(const std::string& kind) {
  static const std::map<std::string, int> codes = {
      {"bad_uri", exit_code::invalid_job},        {"no_credentials", exit_code::invalid_job},
      {"credentials_refused", exit_code::invalid_job}, {"not_found", exit_code::invalid_job},
      {"access_denied", exit_code::invalid_job},  {"s3_refused", exit_code::invalid_job},
      {"not_archive", exit_code::invalid_job},    {"damaged_archive", exit_code::invalid_job},
      {"hostile_member", exit_code::invalid_job}, {"unreachable", exit_code::environment},
      {"s3_error", exit_code::environment},       {"disk", exit_code::environment},
      {"no_client", exit_code::launch_failed},
  };
  auto it = codes.find(kind);
  return it == codes.end() ? exit_code::internal_error : it->second;
}

bool is_disk_error(const std::error_code& error) {
  return error == std::errc::no_space_on_device || error == std::errc::read_only_file_system ||
         error.value() == EDQUOT;
}

std::string fetch_with_helper(const CodeSource& source, CodeStaging& staging, const CodeSettings& settings) {
  const std::string from = source.kind == SourceKind::s3_object ? source.given : source.path.string();
  std::deque<std::string> log_tail;
  std::string result_line;
  StreamedCommand command;
  command.argv = {settings.fetch_python, "-I", "-c", std::string(fetch_code_source()), from,
                  staging.download().string(), staging.unpacked().string()};
  command.environment = settings.environment;
  command.working_directory = staging.unpacked().parent_path().string();
  command.timeout = settings.fetch_timeout;
  command.stop_signal = settings.stop_signal;
  command.on_line = [&](bool error, std::string_view line) {
    if (!error) {
      result_line = line;
      return;
    }
    log_info("code: {}", line);
    log_tail.emplace_back(line);
    if (log_tail.size() > kept_lines) log_tail.pop_front();
  };
  StreamedOutcome outcome;
  try {
    outcome = run_streamed(command);
  } catch (const SpawnError& error) {
    throw UserCodeError(exit_code::launch_failed,
                        fmt::format("The job's code could not be fetched from {}: {}.", source.given, error.what()),
                        {"Fetching needs python3 with boto3 in the image: install python3 and python3-boto3."});
  }
  const std::vector<std::string> details(log_tail.begin(), log_tail.end());
  if (outcome.stopped_by) {
    throw UserCodeError(exit_code::signal_base + *outcome.stopped_by,
                        fmt::format("The job was stopped by {} while its code was fetched from {}.",
                                    signal_name(*outcome.stopped_by), source.given),
                        details);
  }
  if (outcome.timed_out) {
    throw UserCodeError(exit_code::timed_out,
                        fmt::format("The job's code could not be fetched from {} within {} s "
                                    "(TRAIN_CODE_FETCH_TIMEOUT_SECONDS); the fetch was ended.",
                                    source.given, settings.fetch_timeout.count()),
                        details);
  }
  nlohmann::json result = nlohmann::json::parse(result_line, nullptr, false);
  const int status = exit_code_from_wait_status(outcome.wait_status);
  if ((status != 0 && status != 1) || !result.is_object() || !result.contains("ok")) {
    throw UserCodeError(exit_code::internal_error,
                        fmt::format("The job's code could not be fetched from {}: train's fetcher (fetch_code.py) "
                                    "{} without its result (please report this).",
                                    source.given, describe_wait_status(outcome.wait_status)),
                        details);
  }
  if (!result.value("ok", false)) {
    const std::string kind = result.value("kind", "");
    throw UserCodeError(exit_code_of(kind),
                        fmt::format("The job's code could not be fetched: {}.", result.value("message", kind)),
                        details);
  }
  staging.move_into_place();
  const auto files = result.value("files", 0);
  const auto bytes = result.value("bytes", 0);
  if (source.kind == SourceKind::s3_object) {
    return fmt::format("downloaded {} ({} bytes, credentials from {}) and unpacked {} files ({} bytes)",
                       source.given, result.value("downloaded", 0), result.value("credentials", ""), files, bytes);
  }
  return fmt::format("unpacked {} ({} files, {} bytes)", source.path.string(), files, bytes);
}

}  // namespace

std::string fetch_code(const CodeSource& source, const std::filesystem::path& code_folder,
                       const CodeSettings& settings) {
  try {
    CodeStaging staging(code_folder);
    if (source.kind != SourceKind::local_folder) {
      return fmt::format("{} into {}", fetch_with_helper(source, staging, settings), code_folder.string());
    }
    std::error_code error;
    std::filesystem::copy(source.path, staging.unpacked(), std::filesystem::copy_options::recursive, error);
    if (error) {
      throw UserCodeError(is_disk_error(error) ? exit_code::environment : exit_code::invalid_job,
                          fmt::format("The job's code could not be copied from {} into {}: {}.",
                                      source.path.string(), code_folder.string(), error.message()));
    }
    staging.move_into_place();
    return fmt::format("copied the folder {} into {}", source.path.string(), code_folder.string());
  } catch (const std::filesystem::filesystem_error& error) {
    throw UserCodeError(exit_code::environment,
                        fmt::format("The job's code could not be put into {}: {}.", code_folder.string(),
                                    error.what()),
                        {"train unpacks the code beside the code folder (or inside it when it is a mount point) and "
                         "renames it into place: that folder must be writable and have room."});
  }
}

}  // namespace train::user_code
