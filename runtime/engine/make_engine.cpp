// Which engine a rank trains with: decided once from the settings (device and precision).
#include "runtime/engine/engine.h"

#include "runtime/engine/cpu_engine.h"
#include "runtime/engine/cuda_engine.h"

namespace train {

std::unique_ptr<Engine> make_engine(const TrainingSettings& settings, int classes, const RankIdentity& identity,
                                    MPI_Comm comm, std::chrono::milliseconds timeout) {
  if (settings.device == Device::cpu) {
    return std::make_unique<CpuEngine>(settings, classes, identity, comm, timeout);
  }
  // The build's backend: runtime/engine/cuda_engine.cpp, or runtime/engine/cuda_engine_absent.cpp in a CPU-only binary.
  return make_cuda_engine(settings, classes, identity, comm, timeout);
}

}  // namespace train
