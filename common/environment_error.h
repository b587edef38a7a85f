// Failures of the machine rather than of the job or of train: a disk that is full or read-only, a folder
// train may not write. They get their own exit code (exit_codes.h: environment) and a message that says
// which path and what to change, never "internal error".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace train {

class EnvironmentError : public std::runtime_error {
 public:
  explicit EnvironmentError(const std::string& message) : std::runtime_error(message) {}
};

// True for the errno values that say the environment is at fault: ENOSPC, EDQUOT (full), EROFS
// (read-only), EACCES, EPERM (not permitted).
bool is_environment_errno(int error);

// What to do about such an errno, as the end of a sentence ("free space on that disk, ...").
std::string environment_advice(int error);

// "MESSAGE; this is the machine, not the job: ADVICE" for an environment errno.
std::string machine_fault_message(std::string_view message, int error);

// The error for "cannot ACTION PATH: strerror": an EnvironmentError with advice when `error` is an
// environment errno, else a std::runtime_error.
[[noreturn]] void throw_file_error(std::string_view action, const std::string& path, int error);

}  // namespace train
