// The timeline of a job (timeline_steps=A-B or TRAIN_TIMELINE=A-B): every rank records steps A to B as a
// Chrome trace that Perfetto and chrome://tracing open, and prints what share of the step it spent waiting
// for data, computing and waiting for reductions that backward did not hide.
//
// What is recorded, and from where: the trainer's own spans (each step, its wait for the batch, the stop
// vote, log lines, validation and checkpoints) from the host's clock; the loader's decoding threads (one
// span per thread and batch with its read, decode and augment times, and a counter per batch); and the
// engine's marks of each step, which the timeline asks of it as a StepRecorder (step_recorder.h; the marks:
// step_marks.h: forward and backward by layer group, the loss, each bucket's reduction with its bytes, the
// wait for the reductions, the optimizer; on the GPU the uploads and the compute stream's own steps, from
// device timestamps). The ranks' clocks are put on rank 0's (clock_alignment.h) when the timeline starts.
//
// When: recording starts after step A-1 and ends after step B (or at the end of training). The files are
// written at the first log line after B, at an epoch's end or when training ends, whichever comes first: by
// then the GPU has long run the recorded steps, so reading their marks back does not stall it. Every rank
// writes output/data/timeline/rank-R.json; rank 0 also the merged timeline.json with every rank (one process
// each). Their size is bounded: at most max_timeline_steps steps and max_timeline_events events per rank.
// A file that cannot be written is a warning, never the job's failure.
#pragma once

#include "common/non_copyable.h"
#include "job/rank_environment.h"
#include "job/step_range.h"
#include "runtime/data/loader/batch_loader.h"
#include "runtime/timeline/clock_alignment.h"
#include "runtime/timeline/step_recorder.h"
#include "runtime/timeline/trace_event.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace train::timeline {

inline constexpr size_t max_timeline_events = 250000;

class LoaderRecorder;

// What a job's timeline records and where it goes (from the training settings: timeline_steps or
// TRAIN_TIMELINE, the job's output folders, this rank's host and device).
struct TimelineOptions {
  StepRange steps;                    // recorded, 1-based, both included
  std::filesystem::path directory;    // the files' folder (output/data/timeline)
  std::filesystem::path output_dir;   // the job's output/: no link below it is followed
  std::string host;                   // this rank's host
  bool device = false;                // the steps run on a GPU (its marks are device timestamps)
};

class Timeline : private NonCopyable {
 public:
  // Collective (the clocks are aligned): every rank makes it when the job asks for a timeline.
  Timeline(const TimelineOptions& options, const RankIdentity& identity, MPI_Comm comm,
           std::chrono::milliseconds timeout);
  ~Timeline();

  // For the training loader's options: it times its threads while the timeline records.
  std::shared_ptr<data::LoaderObserver> loader_observer() const;

  bool recording() const { return state_ == State::recording; }
  // Before the first step: `step` steps are done (a resumed job), `total_steps` is the job's last one (a
  // range past it records only what the job runs). Starts recording when step A comes next.
  void start(int64_t step, int64_t total_steps, StepRecorder& recorder);
  // After step `step`: ends it when recorded, stops after step B, starts the recording after step A-1
  // (asking the recorder, the engine, to mark the range's steps).
  void steps_done(int64_t step, StepRecorder& recorder);
  // The trainer waited from `waited_from` to `arrived` (monotonic_ns) for `batch`.
  void batch_arrived(const data::Batch& batch, int64_t waited_from, int64_t arrived);
  // A span of the training thread (ignored unless recording). On a GPU job the counted categories become
  // `host`: there the compute stream's own spans count.
  void host_span(std::string name, TraceCategory category, int64_t begin_ns, int64_t end_ns);
  // A phase of the rank's start-up (runtime/startup_phases.h), on a track of its own (the first batch's
  // wait is also step 1's), when the recording holds step 1 (until the files are written); counted in no step.
  void startup_span(std::string name, int64_t begin_ns, int64_t end_ns);
  // Writes the files and prints the summary once the recorded steps are over: at the first call after step B,
  // or with `final` (training ends) whatever was recorded. Collective: every rank calls it at the same step.
  void finish_if_due(int64_t step, StepRecorder& recorder, bool final);

 private:
  enum class State { waiting, recording, recorded, done };
  void finish(StepRecorder& recorder);
  void add(TraceEvent event);  // a host event, within the bound
  std::vector<TraceEvent> loader_events();
  void write(const std::string& path, const std::string& content) const;

  std::filesystem::path directory_;
  std::filesystem::path output_dir_;  // the job's output/: no link below it is followed
  std::string host_;
  RankIdentity identity_;
  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
  bool device_ = false;
  int64_t first_ = 0, last_ = 0;  // the steps to record, within the job
  ClockAlignment alignment_;
  State state_ = State::waiting;
  int64_t recorded_first_ = 0, recorded_last_ = 0;  // the steps actually recorded
  int64_t step_begin_ = 0;
  std::vector<TraceEvent> host_events_;
  size_t dropped_ = 0;  // events beyond max_timeline_events
  std::shared_ptr<LoaderRecorder> loader_;
};

// A span of the training thread from its construction to its end, when the timeline records (no clock is
// read otherwise): checkpoints, validation, the stop vote, log lines.
class TimelineSpan : private NonCopyable {
 public:
  TimelineSpan(Timeline* timeline, const char* name, TraceCategory category);
  ~TimelineSpan();

 private:
  Timeline* timeline_;
  const char* name_;
  TraceCategory category_;
  int64_t begin_ = 0;
};

}  // namespace train::timeline
