#include "common/paths.h"

#include <algorithm>
#include <cstdlib>

namespace train {

JobPaths JobPaths::from_environment() {
  JobPaths paths;
  if (const char* base = std::getenv("SAGEMAKER_BASE_DIR"); base != nullptr && *base != '\0') {
    paths.base = base;
  }
  return paths;
}

std::optional<std::filesystem::path> JobPaths::relocated(const std::filesystem::path& given) const {
  const std::filesystem::path path = given.lexically_normal();
  if (base == sagemaker_base_path) return path;
  const auto relative = path.lexically_relative(sagemaker_base_path);
  if (!relative.empty() && *relative.begin() != "..") return relative == "." ? base : base / relative;
  if (std::mismatch(sagemaker_base_path.begin(), sagemaker_base_path.end(), given.begin(), given.end()).first ==
      sagemaker_base_path.end()) {
    return std::nullopt;
  }
  return path;
}

}  // namespace train
