// Where the loader's threads spend their time, for the timeline (runtime/timeline/). Nothing here runs
// unless a LoaderObserver is given and active: then each decoding thread times every sample's stages
// (StageTimer in the sources) and reports, per batch it worked on, one LoadedPiece.
#pragma once

#include "common/monotonic_clock.h"
#include "common/non_copyable.h"

#include <cstdint>

namespace train::data {

// A sample's stages: reading its bytes (a file, a record; synthetic data: making the noise), decoding the
// image, and augmenting it (crop, flip, colour, resampling and normalising). In Pipe mode the feed's thread
// reads the records, so the decoding threads show no reading.
enum class SampleStage { read, decode, augment };
inline constexpr int sample_stages = 3;
struct SampleStageTimes {
  int64_t nanoseconds[sample_stages] = {0, 0, 0};
};

// Adds the time of its scope to one stage of `times`; does nothing (reads no clock) when `times` is null.
class StageTimer : private NonCopyable {
 public:
  StageTimer(SampleStageTimes* times, SampleStage stage)
      : times_(times), stage_(stage), started_(times != nullptr ? monotonic_ns() : 0) {}
  ~StageTimer() {
    if (times_ != nullptr) times_->nanoseconds[static_cast<int>(stage_)] += monotonic_ns() - started_;
  }

 private:
  SampleStageTimes* times_;
  SampleStage stage_;
  int64_t started_;
};

// One decoding thread's work on one batch: from the start of its first sample of the batch to the end of
// its last (monotonic_ns), and the stages' sums over those samples.
struct LoadedPiece {
  int thread = 0;
  int64_t epoch = 0, index = 0;  // the batch's DataPosition
  int samples = 0;
  int64_t begin_ns = 0, end_ns = 0;
  SampleStageTimes stages;
};

class LoaderObserver {
 public:
  virtual ~LoaderObserver() = default;
  // Whether to time now (cheap: read before every sample).
  virtual bool active() const = 0;
  // Called from the decoding threads, with the loader's lock held: must be quick and never call the loader.
  virtual void loaded(const LoadedPiece& piece) = 0;
};

}  // namespace train::data
