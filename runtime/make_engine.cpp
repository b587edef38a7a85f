// Which engine a rank trains with: decided once from the settings (device and precision).
#include "runtime/trainer.h"

#include "common/config_error.h"
#include "runtime/cpu_engine.h"
#if TRAIN_WITH_CUDA
#include "runtime/cuda_engine.h"
#endif

namespace train {

std::unique_ptr<Engine> make_engine(const TrainingSettings& settings, int classes, const RankIdentity& identity,
                                    MPI_Comm comm, std::chrono::milliseconds timeout) {
  if (settings.device == Device::cpu) {
    return std::make_unique<CpuEngine>(settings, classes, identity, comm, timeout);
  }
#if TRAIN_WITH_CUDA
  return make_cuda_engine(settings, classes, identity, comm, timeout);
#else
  // The job description resolves device=cuda to a GPU only when this binary can use one: not reached.
  throw ConfigError("this train binary was built without CUDA and cannot train on a GPU; use the CUDA image, or "
                    "set the hyperparameter device=cpu");
#endif
}

}  // namespace train
