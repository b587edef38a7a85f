// Script mode's code: the folder named by sagemaker_submit_directory fetched into the code folder (/opt/ml/code)
// when that is empty, then installed with pip, as the SageMaker training toolkit does on every host before it
// runs the program (files.download_and_extract, entry_point.install). docs/script-mode.md says what is done,
// with which settings, and where it differs from the toolkit.
//
// The launcher calls prepare_user_code on every host before the ranks start; `train prepare-code` calls it
// alone (prepare_code_command.h).
#pragma once

#include "common/environment_map.h"
#include "common/paths.h"
#include "entrypoint/user_code/entry_point.h"
#include "entrypoint/user_code/user_code_error.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace train::user_code {

struct CodeRequest {
  std::string submit_directory;  // sagemaker_submit_directory, decoded; empty: the code folder itself
  std::string program;           // sagemaker_program (SAGEMAKER_PROGRAM wins), relative to the code folder
};

struct CodeSettings {
  std::chrono::seconds fetch_timeout{1800};    // TRAIN_CODE_FETCH_TIMEOUT_SECONDS: download and unpack
  std::chrono::seconds install_timeout{3600};  // TRAIN_CODE_INSTALL_TIMEOUT_SECONDS: pip
  std::string python = "python3";  // pip's interpreter, searched in PATH: the program must run with the same one
  std::string fetch_python;        // fetch_code.py's: Debian's /usr/bin/python3 (python3-boto3's), else python3
  EnvironmentMap environment;      // of pip and the fetcher: PATH, AWS_*, PIP_*, ...
  std::function<std::optional<int>()> stop_signal;  // polled: a stop signal that reached the launcher, if any
};

// The settings from the launcher's environment (the TRAIN_* timeouts; ConfigError when one is bad).
CodeSettings code_settings_from_environment(const EnvironmentMap& environment);

struct PreparedCode {
  std::filesystem::path folder;  // the code folder: the program runs there
  ProgramKind kind = ProgramKind::python_program;
  std::vector<std::string> done;  // what was done, one sentence each, for the log and `train validate`
};

// Fetches and installs the job's code, logging each step (and pip's output, line by line). Throws
// UserCodeError with the report's sentence and exit code when it cannot: a bad submit directory or program
// name, a missing program, an archive that is not one or would escape the folder, an S3 object that does not
// exist or is denied, no credentials (all 65); S3 out of reach, a full disk (74); no python3 or boto3 (69);
// pip that fails (69); a fetch or pip that runs out of time (124); a stop signal N (128+N).
PreparedCode prepare_user_code(const JobPaths& paths, const CodeRequest& request, const CodeSettings& settings);

}  // namespace train::user_code
