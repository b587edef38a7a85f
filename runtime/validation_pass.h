// The validation pass, an observer of the loop (runtime/training_observer.h): at every epoch's end, top-1 and
// top-5 of the model in inference mode over the validation channel, each image counted once (collective;
// rank 0 logs the line). Nothing without a validation channel.
#pragma once

#include "runtime/training_context.h"
#include "runtime/training_observer.h"

#include <chrono>

namespace train {

class ValidationPass final : public TrainingObserver {
 public:
  // `data_timeout`: how long to wait for a batch (TRAIN_DATA_TIMEOUT_SECONDS).
  ValidationPass(const TrainingContext& context, std::chrono::seconds data_timeout)
      : context_(context), data_timeout_(data_timeout) {}

  void validate(EpochEnd& end) override;

 private:
  TrainingContext context_;
  std::chrono::seconds data_timeout_;
};

}  // namespace train
