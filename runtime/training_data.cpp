#include "runtime/training_data.h"

#include "common/config_error.h"
#include "common/environment_error.h"
#include "common/log.h"
#include "job/hyperparameter_schema.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/comm/broadcast_text.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/data/data_error.h"
#include "runtime/data/loader/sampler.h"
#include "runtime/data/sources/data_channel.h"
#include "runtime/data/sources/image_folder.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>

namespace train {

namespace {

// ImageNet-1k's training set size: synthetic data behaves like an epoch of it.
constexpr int64_t synthetic_samples = 1281167;

// Record files are indexed by the first rank of each host, and the index is sent to the host's other ranks:
// indexing reads a TFRecord data set through once, so once per host rather than once per rank. (Per host, not
// per job: with ShardedByS3Key every host holds other files.) A failure to index fails every rank of the host
// with the same message.
data::RecordIndex index_once_per_host(MPI_Comm comm, const std::function<data::RecordIndex()>& build) {
  MPI_Comm host;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  int local_rank = 0;
  MPI_CHECK(MPI_Comm_rank(host, &local_rank));
  data::RecordIndex index;
  std::exception_ptr failure;
  std::string bytes;  // the serialized index, or the failure's message
  int64_t failed = 0;  // 1: the data, 2: the machine (a full or read-only TMPDIR)
  if (local_rank == 0) {
    try {
      index = build();
      bytes = data::serialize_record_index(index);
    } catch (const std::exception& error) {
      failure = std::current_exception();
      bytes = error.what();
      failed = dynamic_cast<const EnvironmentError*>(&error) != nullptr ? 2 : 1;
    }
  }
  MPI_CHECK(MPI_Bcast(&failed, 1, MPI_INT64_T, 0, host));
  comm::broadcast_text(bytes, host);
  if (!failure && failed == 0) {
    if (local_rank != 0) index = data::parse_record_index(bytes);
    // Every rank of the host opens the inflated gzip shards, then the folder goes: from here on no rank's
    // death, SIGKILL included, can leave them on the disk.
    std::exception_ptr not_held;
    try {
      data::hold_temporary_files(index);
    } catch (const std::exception&) {
      not_held = std::current_exception();
    }
    MPI_CHECK(MPI_Barrier(host));
    index.inflated.reset();
    if (not_held) {
      MPI_CHECK(MPI_Comm_free(&host));
      std::rethrow_exception(not_held);
    }
  }
  MPI_CHECK(MPI_Comm_free(&host));
  if (failure) std::rethrow_exception(failure);
  if (failed == 2) throw EnvironmentError(bytes);
  if (failed != 0) throw data::DataError(bytes);
  return index;
}

// Corrupt records found while indexing (skip_corrupt=true): every rank indexes the same files, so rank 0 speaks.
void report_corrupt_at_open(const char* channel, const data::OpenedData& opened, int rank) {
  if (rank != 0 || opened.corrupt_at_open == 0) return;
  log_info("{} data: skipped {} corrupt record{} while indexing {}", channel, opened.corrupt_at_open,
           opened.corrupt_at_open == 1 ? "" : "s", opened.layout.root);
  for (const auto& note : opened.corrupt_notes) log_info("  skipped: {}", note);
}

data::ImageFolderOptions image_options(const TrainingSettings& settings) {
  data::ImageFolderOptions image;
  image.height = settings.height;
  image.width = settings.width;
  image.augmentation = settings.augmentation;
  return image;
}

}  // namespace

TrainingData::TrainingData(const TrainingSettings& settings, const RankIdentity& identity, MPI_Comm comm,
                           std::chrono::milliseconds collective_timeout, std::chrono::milliseconds data_timeout)
    : settings_(settings), identity_(identity), comm_(comm), collective_timeout_(collective_timeout),
      data_timeout_(data_timeout) {
  open_channels();
}

TrainingData::~TrainingData() = default;

void TrainingData::open_channels() {
  if (settings_.pipe) {
    // The stream is read once training starts (open_pipe); its classes are the hyperparameter's.
    classes_ = *settings_.num_classes;
    return;
  }
  std::optional<data::LabelSummary> training_labels;  // real data's; synthetic data has the classes it is told
  if (settings_.data_format == DataFormat::synthetic) {
    const int classes = settings_.num_classes.value_or(1000);
    train_source_ = std::make_shared<data::SyntheticSource>(synthetic_samples, classes, settings_.height, settings_.width);
  } else {
    // The format is detected per channel (data_channel.h) unless data_format names one.
    data::DataOptions options;
    options.image = image_options(settings_);
    options.tfrecord_label_offset = settings_.tfrecord_label_offset;
    options.skip_corrupt = settings_.skip_corrupt;
    options.share_index = [this](const std::function<data::RecordIndex()>& build) {
      return index_once_per_host(comm_, build);
    };
    auto list_dir = [](const std::optional<std::filesystem::path>& dir) {
      return dir ? std::optional<std::string>(dir->string()) : std::nullopt;
    };
    auto training = data::open_channel(settings_.train_dir.string(), list_dir(settings_.train_list_dir),
                                       settings_.data_format, options);
    training_labels = training.labels;
    report_corrupt_at_open("training", training, identity_.rank);
    corrupt_at_open_ = training.corrupt_at_open;
    class_names_ = training.class_names;
    train_source_ = std::const_pointer_cast<data::SampleSource>(training.source);
    if (settings_.validation_dir) {
      options.image.augmentation = Augmentation::none;
      auto validation = data::open_channel(settings_.validation_dir->string(), list_dir(settings_.validation_list_dir),
                                           settings_.data_format, options, &training);
      report_corrupt_at_open("validation", validation, identity_.rank);
      validation_source_ = std::const_pointer_cast<data::SampleSource>(validation.source);
    }
  }
  classes_ = training_labels ? classes_from_labels(*training_labels) : train_source_->num_classes();
  if (validation_source_ && validation_source_->num_classes() > classes_) {
    throw ConfigError(fmt::format("the validation data has labels up to {} but the model has {} classes; the "
                                  "validation labels must be classes of the training data",
                                  validation_source_->num_classes() - 1, classes_));
  }
}

// The training data's labels across the job (with ShardedByS3Key every host holds other files): at least two
// classes, none at or beyond num_classes, and, when the data sets the number of classes, none far beyond all
// the others (a mistyped label would silently make a model of that many classes, most of them without a
// sample). Returns the number of classes. Collective.
int TrainingData::classes_from_labels(const data::LabelSummary& mine) {
  int64_t range[2] = {-int64_t{mine.lowest}, mine.highest};  // both by MPI_MAX
  comm::bounded_allreduce(range, 2, MPI_INT64_T, MPI_MAX, comm_, collective_timeout_, "the training data's labels");
  const int64_t lowest = -range[0], highest = range[1];
  int64_t below = mine.highest < highest ? mine.highest : mine.below_highest;
  comm::bounded_allreduce(&below, 1, MPI_INT64_T, MPI_MAX, comm_, collective_timeout_, "the training data's labels");
  const std::string where = mine.highest == highest ? fmt::format(" ({})", mine.highest_at) : "";
  const std::string channel = settings_.train_dir.string();
  const int64_t most = most_classes, fewest = fewest_classes;  // num_classes' bounds
  if (lowest == highest) {
    throw data::DataError(fmt::format("the training data in {} has a single class: every sample's label is {}{}; a "
                                      "classifier needs at least {} classes, so add the other classes' data (an "
                                      "image folder needs one subfolder per class)",
                                      channel, highest, where, fewest));
  }
  if (settings_.num_classes) {
    if (highest >= *settings_.num_classes) {
      throw data::DataError(fmt::format("the training data in {} has the label {}{}, but the hyperparameter "
                                        "num_classes is {}, so labels must be 0 to {}: fix that label, or raise "
                                        "num_classes",
                                        channel, highest, where, *settings_.num_classes, *settings_.num_classes - 1));
    }
    return *settings_.num_classes;
  }
  if (highest >= most) {
    throw data::DataError(fmt::format("the training data in {} has the label {}{}, beyond the largest class number "
                                      "a model can have ({}: num_classes is at most {}); fix that label",
                                      channel, highest, where, most - 1, most));
  }
  if (highest > 2 * (below + 1) + 16) {
    throw data::DataError(fmt::format("the training data in {} has the label {}{}, far beyond every other label (the "
                                      "next highest is {}): taken as it is, it would make a model of {} classes, "
                                      "most of them without a sample; fix that label, or set the hyperparameter "
                                      "num_classes if the model is meant to have that many classes",
                                      channel, highest, where, below, highest + 1));
  }
  return static_cast<int>(highest + 1);
}

std::unique_ptr<data::BatchLoader> TrainingData::open_training(const data::DataPosition& start,
                                                             std::shared_ptr<data::LoaderObserver> observer) {
  data::LoaderOptions options{.batch_size = settings_.batch_per_rank,
                              .threads = std::max(1, settings_.threads),
                              .prefetch_batches = 2,
                              .shuffle = settings_.shuffle,
                              .seed = settings_.seed,
                              .rank = settings_.data_rank,
                              .ranks = settings_.data_ranks,
                              .epochs = settings_.epochs,
                              .start = start,
                              .skip_corrupt = settings_.skip_corrupt,
                              .min_batch = 2,
                              .observer = std::move(observer)};
  if (settings_.pipe) {
    // Every rank reads ceil(N / R) records per epoch when the stream holds num_training_samples = N.
    options.samples_per_epoch = data::shard_size(*settings_.num_training_samples, identity_.size);
    return std::make_unique<data::BatchLoader>(open_pipe(start), image_options(settings_), options);
  }
  options.samples_per_epoch = common_shard_size();
  return std::make_unique<data::BatchLoader>(train_source_, options);
}

std::unique_ptr<data::BatchLoader> TrainingData::open_validation() const {
  if (!validation_source_) return nullptr;
  const data::LoaderOptions options{.batch_size = settings_.batch_per_rank,
                                    .threads = std::max(1, settings_.threads),
                                    .shuffle = false,
                                    .rank = identity_.rank,
                                    .ranks = identity_.size,
                                    .epochs = 1};
  return std::make_unique<data::BatchLoader>(validation_source_, options);
}

int64_t TrainingData::validation_samples() const { return validation_source_ ? validation_source_->size() : 0; }

// Samples every rank reads per epoch. With FullyReplicated every rank shards the same data: ceil(n / R).
// With ShardedByS3Key each host shards its own files over its ranks, and hosts may hold different numbers
// of samples: every rank then reads as many as a rank of the fullest host (the others repeat samples from
// the start of their epoch order), so that all ranks run the same number of steps.
int64_t TrainingData::common_shard_size() {
  const int64_t mine = data::shard_size(train_source_->size(), settings_.data_ranks);
  // [0]: the largest share; [1]: the job's samples (each host's first rank counts its host's).
  int64_t numbers[2] = {mine, settings_.sharded ? (identity_.local_rank == 0 ? train_source_->size() : 0)
                                                : (identity_.rank == 0 ? train_source_->size() : 0)};
  comm::bounded_allreduce(&numbers[0], 1, MPI_INT64_T, MPI_MAX, comm_, collective_timeout_, "the largest data share");
  comm::bounded_allreduce(&numbers[1], 1, MPI_INT64_T, MPI_SUM, comm_, collective_timeout_, "the job's sample count");
  const int64_t most = numbers[0], total = numbers[1];
  if (most != mine && identity_.local_rank == 0) {
    log_info("ShardedByS3Key: this host holds {} samples ({} per rank per epoch) and the fullest host {} per rank; "
             "this host's ranks repeat samples from the start of each epoch to keep step",
             train_source_->size(), mine, most);
  }
  if (identity_.rank == 0 && settings_.num_training_samples && *settings_.num_training_samples != total) {
    log_info("note: hyperparameter num_training_samples is {} but the training data holds {} samples; training "
             "uses the data's count",
             *settings_.num_training_samples, total);
  }
  return most;
}

// Pipe mode: the host's first rank starts the reader of the channel's FIFOs (PipeDealer) and tells the
// host's ranks where to connect; every rank then receives its own records. Records are dealt over all the
// job's ranks (FullyReplicated: every host streams the same data) or over the host's (ShardedByS3Key).
std::shared_ptr<data::RecordFeed> TrainingData::open_pipe(const data::DataPosition& start) {
  MPI_Comm host;
  MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  int local_rank = 0, local_size = 1;
  MPI_CHECK(MPI_Comm_rank(host, &local_rank));
  MPI_CHECK(MPI_Comm_size(host, &local_size));
  int mine = settings_.data_rank;
  std::vector<int> deal_rank_of(static_cast<size_t>(local_size));
  MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, deal_rank_of.data(), 1, MPI_INT, host));
  std::string message;  // the rendezvous name, or why the reader could not start
  int64_t failed = 0;
  if (local_rank == 0) {
    try {
      data::PipeDealerOptions options;
      options.fifo_prefix = settings_.pipe_fifo_prefix.string();
      options.first_epoch = start.epoch;
      options.epochs = settings_.epochs;
      options.first_epoch_skip = start.index;
      options.deal_ranks = settings_.data_ranks;
      options.deal_rank_of = deal_rank_of;
      options.batch_size = settings_.batch_per_rank;
      if (settings_.data_format == DataFormat::tfrecord) options.records.format = data::RecordFormat::tfrecord;
      if (settings_.data_format == DataFormat::recordio) options.records.format = data::RecordFormat::recordio;
      options.records.unwrap_recordio = settings_.pipe_unwrap_recordio;
      options.records.tfrecord_label_offset = settings_.tfrecord_label_offset;
      options.records.skip_corrupt = settings_.skip_corrupt;
      options.records.num_classes = classes_;
      options.timeout = data_timeout_;
      data::PipeRendezvous rendezvous = data::listen_for_ranks(local_size);
      message = rendezvous.name;
      pipe_dealer_ = std::make_unique<data::PipeDealer>(std::move(rendezvous), std::move(options));
    } catch (const std::exception& error) {
      message = error.what();
      failed = 1;
    }
  }
  MPI_CHECK(MPI_Bcast(&failed, 1, MPI_INT64_T, 0, host));
  comm::broadcast_text(message, host);
  MPI_CHECK(MPI_Comm_free(&host));
  if (failed != 0) throw data::DataError(message);
  pipe_feed_ = std::make_shared<data::PipeFeed>(message, local_rank, settings_.pipe_channel, data_timeout_);
  return pipe_feed_;
}

int64_t TrainingData::corrupt_streamed(int64_t epoch) const {
  // Counted by each host's reader: once for the job when every host streams the same data (FullyReplicated),
  // once per host when each streams its own part.
  if (pipe_feed_ && (identity_.rank == 0 || (settings_.sharded && identity_.local_rank == 0))) {
    return pipe_feed_->corrupt_in_epoch(epoch);
  }
  return 0;
}

std::string TrainingData::describe() const {
  if (!settings_.pipe) return train_source_->describe();
  return fmt::format("Pipe-mode channel {} (FIFOs {}_N, one per epoch; {} records per epoch expected; dealt over {} "
                     "rank{}{}), {} classes, augmentation {}, input {}x{}",
                     settings_.pipe_channel, settings_.pipe_fifo_prefix.string(), *settings_.num_training_samples,
                     settings_.data_ranks, settings_.data_ranks == 1 ? "" : "s",
                     settings_.sharded ? " per host, ShardedByS3Key" : "", classes_,
                     augmentation_name(settings_.augmentation), settings_.height, settings_.width);
}

}  // namespace train
