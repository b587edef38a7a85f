#include "common/temporary_directory.h"

namespace train {

std::filesystem::path temporary_directory(const EnvironmentMap& environment) {
  return lookup(environment, "TMPDIR").value_or("/tmp");
}

}  // namespace train
