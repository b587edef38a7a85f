// A multi-host job's host failing in a way it can describe: the exit code it ends with (docs/faults.md
// "Exit codes") and the sentence, plus details, that go into its failure file.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace train {

struct HostFailure : std::runtime_error {
  HostFailure(int exit_code, const std::string& summary, std::vector<std::string> details = {})
      : std::runtime_error(summary), code(exit_code), details(std::move(details)) {}
  int code;
  std::vector<std::string> details;
};

}  // namespace train
