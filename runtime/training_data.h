// A rank's data for training: the training channel (File and FastFile mode: a sample source sharded per
// rank; Pipe mode: the host's FIFO reader deals records to its ranks), the optional validation channel, the
// classes, and the loaders that turn them into batches. Collective: every rank constructs it and opens
// training together (record indexes are built once per host, shard sizes agreed across the job).
#pragma once

#include "job/rank_environment.h"
#include "runtime/data/loader/batch_loader.h"
#include "runtime/data/pipe/pipe_dealer.h"
#include "runtime/data/sources/label_summary.h"
#include "runtime/data/sources/sample_source.h"
#include "runtime/training_settings.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace train {

class TrainingData {
 public:
  // Opens the channels (not Pipe mode's stream: that is read as training goes). Throws ConfigError when the
  // data and the hyperparameters disagree (classes), DataError when the data is unreadable.
  TrainingData(const TrainingSettings& settings, const RankIdentity& identity, MPI_Comm comm,
               std::chrono::milliseconds collective_timeout, std::chrono::milliseconds data_timeout);
  ~TrainingData();

  int classes() const { return classes_; }
  const std::vector<std::string>& class_names() const { return class_names_; }

  // This rank's training batches from `start` (a checkpoint's position) to the end of the last epoch.
  // Collective. In Pipe mode the host's first rank starts the FIFO reader here.
  // `observer`: the timeline's, or null (runtime/data/loader_timing.h).
  std::unique_ptr<data::BatchLoader> open_training(const data::DataPosition& start,
                                                   std::shared_ptr<data::LoaderObserver> observer = nullptr);
  // One pass over this rank's share of the validation channel (null when the job has none).
  std::unique_ptr<data::BatchLoader> open_validation() const;
  int64_t validation_samples() const;  // the whole channel's

  // The training data in one phrase, for the log.
  std::string describe() const;
  // Corrupt records skipped while indexing the training channel (skip_corrupt=true).
  int64_t corrupt_at_open() const { return corrupt_at_open_; }
  // Pipe mode: corrupt records the reader of this host skipped in `epoch`'s stream (0 on other ranks).
  int64_t corrupt_streamed(int64_t epoch) const;

 private:
  void open_channels();
  int classes_from_labels(const data::LabelSummary& mine);
  int64_t common_shard_size();
  std::shared_ptr<data::RecordFeed> open_pipe(const data::DataPosition& start);

  const TrainingSettings& settings_;
  RankIdentity identity_;
  MPI_Comm comm_;
  std::chrono::milliseconds collective_timeout_, data_timeout_;
  std::shared_ptr<data::SampleSource> train_source_, validation_source_;
  std::unique_ptr<data::PipeDealer> pipe_dealer_;  // Pipe mode, on the host's first rank: reads the FIFOs
  std::shared_ptr<data::PipeFeed> pipe_feed_;      // Pipe mode: this rank's records
  std::vector<std::string> class_names_;
  int64_t corrupt_at_open_ = 0;
  int classes_ = 0;
};

}  // namespace train
