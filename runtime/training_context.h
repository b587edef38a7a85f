// What the trainer lends its observers (runtime/training_observer.h): the job's settings, this rank's place,
// the communicator and the bound of its collectives, the engine and the data. The trainer owns them all and
// outlives every observer.
#pragma once

#include "job/rank_environment.h"
#include "runtime/engine/engine.h"
#include "runtime/training_data.h"
#include "runtime/training_settings.h"

#include <mpi.h>

#include <chrono>

namespace train {

struct TrainingContext {
  const TrainingSettings& settings;
  RankIdentity identity;
  MPI_Comm comm;
  std::chrono::milliseconds collective_timeout;
  Engine& engine;
  const TrainingData& data;
};

}  // namespace train
