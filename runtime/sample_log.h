// TRAIN_SAMPLE_LOG=DIR, an observer of the loop (runtime/training_observer.h): every rank appends one line
// per step to DIR/rank-R.txt naming the samples it trained on (a diagnostic: the tests check with it that
// every sample is used once per epoch).
#pragma once

#include "job/rank_environment.h"
#include "runtime/training_observer.h"

#include <cstdio>
#include <memory>

namespace train {

class SampleLog final : public TrainingObserver {
 public:
  // Null when TRAIN_SAMPLE_LOG is unset or empty; throws ConfigError when its file cannot be appended to.
  static std::unique_ptr<SampleLog> open_if_asked(const RankIdentity& identity);

  void step_begins(const StepStart& start) override;

 private:
  explicit SampleLog(std::FILE* file) : file_(file, &std::fclose) {}
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
};

}  // namespace train
