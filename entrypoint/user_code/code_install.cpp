#include "entrypoint/user_code/code_install.h"

#include "common/exit_codes.h"
#include "common/log.h"
#include "common/signal_sender.h"
#include "entrypoint/child_process.h"
#include "entrypoint/user_code/streamed_command.h"

#include <fmt/format.h>

#include <cstring>
#include <deque>

namespace train::user_code {

namespace {

constexpr size_t kept_lines = 200;  // of pip's output, to find its error and the package it was at

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

bool contains(const std::vector<std::string>& lines, std::string_view text) {
  for (const auto& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

// What to do about the failures whose cause is the image rather than the requirements.
std::vector<std::string> hints(const std::vector<std::string>& output) {
  if (contains(output, "externally-managed-environment")) {
    return {"This python3 is a distribution's, which refuses pip outside a virtual environment (PEP 668): the "
            "image must remove its EXTERNALLY-MANAGED file (train's image does) or set PIP_BREAK_SYSTEM_PACKAGES=1."};
  }
  if (contains(output, "No module named pip")) return {"The image has no pip: install python3-pip in it."};
  return {};
}

}  // namespace

PipFailure pip_failure(const std::vector<std::string>& output) {
  PipFailure failure;
  size_t error_line = output.size();
  for (const char* prefix : {"ERROR: ", "error: "}) {
    for (size_t i = 0; i < output.size() && error_line == output.size(); ++i) {
      if (starts_with(output[i], prefix)) error_line = i;
    }
  }
  if (error_line == output.size()) {
    for (size_t i = output.size(); i-- > 0;) {
      if (output[i].find_first_not_of(" \t") != std::string::npos) {
        error_line = i;
        break;
      }
    }
  }
  if (error_line < output.size()) failure.error = output[error_line];
  for (size_t i = std::min(error_line, output.size()); i-- > 0;) {
    for (const char* prefix : {"Collecting ", "Processing "}) {
      if (failure.package.empty() && starts_with(output[i], prefix)) failure.package = output[i].substr(strlen(prefix));
    }
    if (!failure.package.empty()) break;
  }
  return failure;
}

std::string install_code(const std::vector<std::string>& command, const std::filesystem::path& folder,
                         const CodeSettings& settings) {
  const std::string shown = fmt::format("{}", fmt::join(command, " "));
  log_info("code: installing in {}: {}", folder.string(), shown);
  if (lookup(settings.environment, "CA_REPOSITORY_ARN")) {
    log_info("warning: CA_REPOSITORY_ARN is set, but train does not log pip in to CodeArtifact as the toolkit does: "
             "give pip its index with PIP_INDEX_URL instead");
  }
  std::deque<std::string> output;
  StreamedCommand run;
  run.argv = command;
  run.environment = settings.environment;
  run.working_directory = folder.string();
  run.timeout = settings.install_timeout;
  run.stop_signal = settings.stop_signal;
  run.on_line = [&](bool error, std::string_view line) {
    write_line(error ? 2 : 1, fmt::format("[pip] {}", line));
    output.emplace_back(line);
    if (output.size() > kept_lines) output.pop_front();
  };
  const auto started = std::chrono::steady_clock::now();
  StreamedOutcome outcome;
  try {
    outcome = run_streamed(run);
  } catch (const SpawnError& error) {
    throw UserCodeError(exit_code::launch_failed,
                        fmt::format("The job's code could not be installed: {}.", error.what()),
                        {fmt::format("Script mode needs {} with pip in the image (python3, python3-pip).",
                                     command.front())});
  }
  const std::vector<std::string> lines(output.begin(), output.end());
  if (outcome.stopped_by) {
    throw UserCodeError(exit_code::signal_base + *outcome.stopped_by,
                        fmt::format("The job was stopped by {} while its code was installed (`{}`).",
                                    signal_name(*outcome.stopped_by), shown),
                        lines);
  }
  if (outcome.timed_out) {
    throw UserCodeError(exit_code::timed_out,
                        fmt::format("The job's code could not be installed within {} s "
                                    "(TRAIN_CODE_INSTALL_TIMEOUT_SECONDS): `{}` was ended with its process group.",
                                    settings.install_timeout.count(), shown),
                        lines);
  }
  if (outcome.wait_status != 0) {
    const PipFailure failure = pip_failure(lines);
    std::vector<std::string> details = lines;
    for (auto& hint : hints(lines)) details.push_back(std::move(hint));
    throw UserCodeError(exit_code::launch_failed,
                        fmt::format("The job's code could not be installed: `{}` {}{}{}", shown,
                                    describe_wait_status(outcome.wait_status),
                                    failure.package.empty() ? "" : fmt::format(" at {}", failure.package),
                                    failure.error.empty() ? "." : fmt::format(": {}", failure.error)),
                        details);
  }
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return fmt::format("installed with `{}` ({:.1f} s)", shown, seconds);
}

}  // namespace train::user_code
