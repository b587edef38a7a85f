// Installing the code's Python package or requirements with pip, as the toolkit does, bounded by
// TRAIN_CODE_INSTALL_TIMEOUT_SECONDS, with pip's output in the job's log line by line.
#pragma once

#include "entrypoint/user_code/user_code.h"

#include <string>
#include <vector>

namespace train::user_code {

// Runs `command` (install_command's) in `folder`; returns what was done, in a sentence. Throws UserCodeError
// naming the package pip was at and its error, with the end of its output.
std::string install_code(const std::vector<std::string>& command, const std::filesystem::path& folder,
                         const CodeSettings& settings);

// From pip's output: its first error line ("ERROR: ..."), and the last package it was collecting or processing.
struct PipFailure {
  std::string error;
  std::string package;
};
PipFailure pip_failure(const std::vector<std::string>& output);

}  // namespace train::user_code
