// `train validate [DIR] [-- CMD ARGS...]`: checks a job description offline and prints the effective configuration, so a
// mistake costs seconds on a laptop instead of an instance start-up.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace train {

// DIR is an /opt/ml-like directory (with input/config inside) or a config directory itself; without it,
// SAGEMAKER_BASE_DIR or /opt/ml. With `user_command`, the job is checked as `train -- CMD` runs it (the
// hyperparameters are the command's own, and the command line each rank runs is shown). Returns the exit
// code.
int run_validate(const std::optional<std::string>& dir, const std::vector<std::string>& user_command = {});

}  // namespace train
