// Which engine a rank trains with: decided once from the settings (device and precision).
#include "runtime/trainer.h"

#include "common/config_error.h"
#include "runtime/cpu_engine.h"

namespace train {

std::unique_ptr<Engine> make_engine(const TrainingSettings& settings, int classes, const RankIdentity& identity,
                                    MPI_Comm comm, std::chrono::milliseconds timeout) {
  if (settings.device == Device::cpu) {
    return std::make_unique<CpuEngine>(settings, classes, identity, comm, timeout);
  }
  throw ConfigError("this build of train trains on the CPU only (the GPU path is not built yet); set the "
                    "hyperparameter device=cpu to train on this GPU host's CPUs");
}

}  // namespace train
