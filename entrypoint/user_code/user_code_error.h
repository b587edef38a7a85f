// Why the user's code could not be fetched or installed: what the job's report says (the failure file's first
// line, the lines below it) and the exit code (common/exit_codes.h; docs/faults.md has a row for each).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace train::user_code {

class UserCodeError : public std::runtime_error {
 public:
  UserCodeError(int exit_code, const std::string& summary, std::vector<std::string> details = {})
      : std::runtime_error(summary), exit_code(exit_code), details(std::move(details)) {}
  int exit_code;
  std::vector<std::string> details;  // e.g. the end of pip's output, oldest first
};

}  // namespace train::user_code
