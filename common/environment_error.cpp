#include "common/environment_error.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace train {

bool is_environment_errno(int error) {
  return error == ENOSPC || error == EDQUOT || error == EROFS || error == EACCES || error == EPERM ||
         error == EFBIG;
}

std::string environment_advice(int error) {
  switch (error) {
    case ENOSPC:
    case EDQUOT: return "free space on that disk (or give the job a larger volume)";
    case EROFS: return "mount that folder writable";
    case EFBIG: return "raise the limit on a file's size (`ulimit -f`, `docker run --ulimit fsize=-1`)";
    default: return "let the user train runs as write there";
  }
}

std::string machine_fault_message(std::string_view message, int error) {
  return fmt::format("{}; this is the machine, not the job: {}", message, environment_advice(error));
}

void throw_file_error(std::string_view action, const std::string& path, int error) {
  std::string message = fmt::format("cannot {} {}: {}", action, path, std::strerror(error));
  if (is_environment_errno(error)) throw EnvironmentError(machine_fault_message(message, error));
  throw std::runtime_error(message);
}

}  // namespace train
