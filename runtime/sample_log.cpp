#include "runtime/sample_log.h"

#include "common/atomic_file.h"
#include "common/config_error.h"
#include "common/environment_map.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <unistd.h>

namespace train {

std::unique_ptr<SampleLog> SampleLog::open_if_asked(const RankIdentity& identity) {
  auto dir = lookup(current_environment(), "TRAIN_SAMPLE_LOG");
  if (!dir || dir->empty()) return nullptr;
  const auto path = std::filesystem::path(*dir) / fmt::format("rank-{}.txt", identity.rank);
  const int fd = open_file_for_appending(path.string());
  std::FILE* file = fd >= 0 ? ::fdopen(fd, "a") : nullptr;
  if (file == nullptr) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw ConfigError(fmt::format("TRAIN_SAMPLE_LOG: cannot append to {}: {}", path.string(), std::strerror(error)));
  }
  return std::unique_ptr<SampleLog>(new SampleLog(file));
}

void SampleLog::step_begins(const StepStart& start) {
  const data::Batch& batch = start.batch;
  fmt::print(file_.get(), "epoch={} step={} padding={} labels={} samples={} repeats={}\n", batch.position.epoch,
             start.step, start.padding ? 1 : 0, fmt::join(batch.labels, ","), fmt::join(batch.samples, ","),
             fmt::join(batch.repeats, ","));
  std::fflush(file_.get());
}

}  // namespace train
