// The CPU-only backend's make_cuda_engine: this binary has no CUDA engine. Not reached in a job: the job
// description resolves device=cuda to a GPU only when the binary can use one (runtime/training_settings.cpp).
#include "runtime/engine/cuda_engine.h"

#include "common/config_error.h"

namespace train {

std::unique_ptr<Engine> make_cuda_engine(const TrainingSettings&, int, const RankIdentity&, MPI_Comm,
                                         std::chrono::milliseconds) {
  throw ConfigError("this train binary was built without CUDA and cannot train on a GPU; use the CUDA image, or "
                    "set the hyperparameter device=cpu");
}

}  // namespace train
