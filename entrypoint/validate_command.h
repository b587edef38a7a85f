// `train validate [DIR]`: checks a job description offline and prints the effective configuration, so a
// mistake costs seconds on a laptop instead of an instance start-up.
#pragma once

#include <optional>
#include <string>

namespace train {

// DIR is an /opt/ml-like directory (with input/config inside) or a config directory itself; without it,
// SAGEMAKER_BASE_DIR or /opt/ml. Returns the exit code.
int run_validate(const std::optional<std::string>& dir);

}  // namespace train
