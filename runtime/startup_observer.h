// The start-up phases (runtime/startup_phases.h) as an observer of the loop (runtime/training_observer.h):
// the first batch's arrival at step 1's start, step 1's end after its stop vote, and then (collective) the
// start-up line on rank 0. It comes before the timeline among the observers, which shows the phases once
// step 1 is noted.
#pragma once

#include "runtime/startup_phases.h"
#include "runtime/training_observer.h"

#include <mpi.h>

#include <chrono>
#include <string>

namespace train {

class StartupObserver final : public TrainingObserver {
 public:
  StartupObserver(std::string host, MPI_Comm comm, std::chrono::milliseconds collective_timeout)
      : host_(std::move(host)), comm_(comm), collective_timeout_(collective_timeout) {}

  void step_begins(const StepStart& /*start*/) override { phases().done(StartupPhase::first_batch); }
  void phase_ends(TrainingPhase phase) override {
    if (phase == TrainingPhase::stop_vote) phases().done(StartupPhase::first_step);  // the first note counts
  }
  void step_done(int64_t /*step*/) override {
    if (reported_) return;
    reported_ = true;
    report_startup_phases(host_, comm_, collective_timeout_);
  }

 private:
  static StartupPhases& phases() { return rank_startup_phases(); }
  std::string host_;
  MPI_Comm comm_;
  std::chrono::milliseconds collective_timeout_;
  bool reported_ = false;
};

}  // namespace train
