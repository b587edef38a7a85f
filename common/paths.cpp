#include "common/paths.h"

#include <cstdlib>

namespace train {

JobPaths JobPaths::from_environment() {
  JobPaths paths;
  if (const char* base = std::getenv("SAGEMAKER_BASE_DIR"); base != nullptr && *base != '\0') {
    paths.base = base;
  }
  return paths;
}

}  // namespace train
