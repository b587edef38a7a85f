// The training clock: wall time since training started, less the pauses at epoch ends (validation,
// checkpoints), so that images/s and step times are the steps' own. The loop pauses it; reports read it.
#pragma once

#include <chrono>

namespace train {

class TrainingClock {
 public:
  using clock = std::chrono::steady_clock;

  void start() { start_ = clock::now(); }
  void pause() {
    paused_at_ = clock::now();
    paused_ = true;
  }
  void resume() {
    paused_seconds_ += seconds_between(paused_at_, clock::now());
    paused_ = false;
  }

  // Stands still while paused.
  double training_seconds() const {
    return seconds_between(start_, paused_ ? paused_at_ : clock::now()) - paused_seconds_;
  }
  double wall_seconds() const { return seconds_between(start_, clock::now()); }

 private:
  static double seconds_between(clock::time_point from, clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  }
  clock::time_point start_ = clock::now(), paused_at_ = clock::now();
  double paused_seconds_ = 0;
  bool paused_ = false;
};

}  // namespace train
