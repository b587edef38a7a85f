// Where temporary files go: $TMPDIR, or /tmp.
#pragma once

#include "common/environment_map.h"

#include <filesystem>

namespace train {

// $TMPDIR of `environment`, /tmp when unset or empty.
std::filesystem::path temporary_directory(const EnvironmentMap& environment);

}  // namespace train
