#include "cpu_trainer.h"

#include "../entrypoint/config_error.h"
#include "../entrypoint/environment_map.h"
#include "../entrypoint/log.h"
#include "cpu_resnet.h"
#include "data/batch_loader.h"
#include "data/data_channel.h"
#include "data/data_error.h"
#include "data/image_folder.h"
#include "data/pipe_dealer.h"
#include "data/sample_source.h"
#include "data/sampler.h"
#include "gradient_reducer_mpi.h"
#include "kernels/ops.h"
#include "model_io/checkpoint.h"
#include "model_io/model_files.h"
#include "model_io/safetensors.h"
#include "model_state.h"
#include "mpi_check.h"
#include "stop_request.h"
#include "bounded_collectives.h"
#include "replica_check.h"
#include "training_settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>

#ifndef TRAIN_VERSION
#define TRAIN_VERSION "unknown"
#endif

namespace train {

namespace {

using clock = std::chrono::steady_clock;

// ImageNet-1k's training set size: synthetic data behaves like an epoch of it.
constexpr int64_t synthetic_samples = 1281167;

std::chrono::seconds timeout_from_environment(const char* name, int default_seconds) {
  auto value = lookup(current_environment(), name);
  if (!value) return std::chrono::seconds(default_seconds);
  if (value->empty() || value->size() > 7 || value->find_first_not_of("0123456789") != std::string::npos) {
    throw ConfigError(fmt::format("environment variable {}: expected a whole number of seconds, got \"{}\"", name, *value));
  }
  return std::chrono::seconds(std::stoi(*value));
}

std::string format_duration(double seconds) {
  auto total = static_cast<int64_t>(std::max(0.0, seconds));
  return fmt::format("{}:{:02}:{:02}", total / 3600, (total / 60) % 60, total % 60);
}

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
  int64_t header[2] = {0, 0};  // failed, bytes
  if (local_rank == 0) {
    try {
      index = build();
      bytes = data::serialize_record_index(index);
    } catch (const std::exception& error) {
      failure = std::current_exception();
      bytes = error.what();
      header[0] = 1;
    }
    header[1] = static_cast<int64_t>(bytes.size());
  }
  MPI_CHECK(MPI_Bcast(header, 2, MPI_INT64_T, 0, host));
  bytes.resize(static_cast<size_t>(header[1]));
  constexpr int64_t chunk = int64_t{1} << 30;
  for (int64_t offset = 0; offset < header[1]; offset += chunk) {
    MPI_CHECK(MPI_Bcast(bytes.data() + offset, static_cast<int>(std::min(chunk, header[1] - offset)), MPI_BYTE, 0, host));
  }
  MPI_CHECK(MPI_Comm_free(&host));
  if (failure) std::rethrow_exception(failure);
  if (header[0] != 0) throw data::DataError(bytes);
  return local_rank == 0 ? std::move(index) : data::parse_record_index(bytes);
}

class CpuTrainer {
 public:
  CpuTrainer(const JobDescription& job, const RankIdentity& identity, MPI_Comm comm)
      : job_(job), identity_(identity), comm_(comm), settings_(derive_training_settings(job, identity)) {}

  int run() {
    step_timeout_ = timeout_from_environment("TRAIN_STEP_TIMEOUT_SECONDS", 900);
    data_timeout_ = timeout_from_environment("TRAIN_DATA_TIMEOUT_SECONDS", 600);
    open_data();
    build_model();
    open_sample_log();
    data::LoaderOptions options;
    options.batch_size = settings_.batch_per_rank;
    options.threads = std::max(1, settings_.threads);
    options.prefetch_batches = 2;
    options.shuffle = settings_.shuffle;
    options.seed = settings_.seed;
    options.rank = settings_.data_rank;
    options.ranks = settings_.data_ranks;
    options.epochs = settings_.epochs;
    options.start = resume_position_;
    options.skip_corrupt = settings_.skip_corrupt;
    options.min_batch = 2;
    std::unique_ptr<data::BatchLoader> loader_owner;
    if (settings_.pipe) {
      // Every rank reads ceil(N / R) records per epoch when the stream holds num_training_samples = N.
      options.samples_per_epoch = data::shard_size(*settings_.num_training_samples, identity_.size);
      loader_owner = std::make_unique<data::BatchLoader>(open_pipe(), image_options(), options);
    } else {
      options.samples_per_epoch = common_shard_size();
      loader_owner = std::make_unique<data::BatchLoader>(train_source_, options);
    }
    data::BatchLoader& loader = *loader_owner;
    steps_per_epoch_ = std::max<int64_t>(1, loader.batches_per_epoch());
    total_steps_ = settings_.epochs * steps_per_epoch_;
    if (settings_.max_steps > 0) total_steps_ = std::min(total_steps_, settings_.max_steps);
    schedule_ = make_schedule(settings_, steps_per_epoch_, total_steps_);
    announce();

    MpiGradientReducer reducer(comm_, model_->bucket_plan(), model_->all_gradients().data(),
                               std::chrono::duration_cast<std::chrono::milliseconds>(step_timeout_));
    if (settings_.pipe) return run_pipe(loader, reducer);
    int64_t epoch = resume_position_.epoch;
    data::Batch batch;
    last_log_ = clock::now();
    start_ = last_log_;
    steps_at_start_ = step_;
    while (step_ < total_steps_) {
      if (!next_batch(loader, batch)) break;
      if (batch.position.epoch != epoch) {
        end_of_epoch(epoch);
        epoch = batch.position.epoch;
      }
      epoch_corrupt_skipped_ += batch.corrupt_skipped;
      const bool stop = train_one_step(batch, reducer);
      if (stop) return stop_with_checkpoint(batch.next);
    }
    // The last epoch ends with the last step (or with max_steps, perhaps part-way).
    end_of_epoch(epoch, /*complete=*/step_ % steps_per_epoch_ == 0);
    return finish_training();
  }

 private:
  // The job agreed to stop (a signal): a checkpoint at `next`, then exit 0 (the launcher reports the signal).
  int stop_with_checkpoint(const data::DataPosition& next) {
    save_checkpoint(next, "stop request");
    if (identity_.rank == 0) {
      write_line(1, fmt::format("stopped at step {} on request ({}); checkpoint written, resume by restarting the job",
                                step_, signal_description()));
    }
    return 0;
  }

  // After the last step: every rank must hold the same parameters, then rank 0 writes the model.
  int finish_training() {
    check_replicas_agree(model_->all_values().data(), model_->all_values().size(), identity_, comm_, step_timeout_ms());
    write_model();
    return 0;
  }

  data::ImageFolderOptions image_options() const {
    data::ImageFolderOptions image;
    image.height = settings_.height;
    image.width = settings_.width;
    image.augmentation = data::parse_augmentation(settings_.augmentation);
    return image;
  }

  // Samples every rank reads per epoch. With FullyReplicated every rank shards the same data: ceil(n / R).
  // With ShardedByS3Key each host shards its own files over its ranks, and hosts may hold different numbers
  // of samples: every rank then reads as many as a rank of the fullest host (the others repeat samples from
  // the start of their epoch order), so that all ranks run the same number of steps.
  int64_t common_shard_size() {
    const int64_t mine = data::shard_size(train_source_->size(), settings_.data_ranks);
    // [0]: the largest share; [1]: the job's samples (each host's first rank counts its host's).
    int64_t numbers[2] = {mine, settings_.sharded ? (identity_.local_rank == 0 ? train_source_->size() : 0)
                                                  : (identity_.rank == 0 ? train_source_->size() : 0)};
    bounded_allreduce(&numbers[0], 1, MPI_INT64_T, MPI_MAX, comm_, step_timeout_ms(), "the largest data share");
    bounded_allreduce(&numbers[1], 1, MPI_INT64_T, MPI_SUM, comm_, step_timeout_ms(), "the job's sample count");
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
  std::shared_ptr<data::RecordFeed> open_pipe() {
    MPI_Comm host;
    MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
    int local_rank = 0, local_size = 1;
    MPI_CHECK(MPI_Comm_rank(host, &local_rank));
    MPI_CHECK(MPI_Comm_size(host, &local_size));
    int mine = settings_.data_rank;
    std::vector<int> deal_rank_of(static_cast<size_t>(local_size));
    MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, deal_rank_of.data(), 1, MPI_INT, host));
    std::string message;  // the rendezvous name, or why the reader could not start
    int64_t header[2] = {0, 0};  // failed, bytes
    if (local_rank == 0) {
      try {
        data::PipeDealerOptions options;
        options.fifo_prefix = settings_.pipe_fifo_prefix.string();
        options.first_epoch = resume_position_.epoch;
        options.epochs = settings_.epochs;
        options.first_epoch_skip = resume_position_.index;
        options.deal_ranks = settings_.data_ranks;
        options.deal_rank_of = deal_rank_of;
        options.batch_size = settings_.batch_per_rank;
        if (settings_.data_format == "tfrecord") options.records.format = data::RecordFormat::tfrecord;
        if (settings_.data_format == "recordio") options.records.format = data::RecordFormat::recordio;
        options.records.unwrap_recordio = settings_.pipe_unwrap_recordio;
        options.records.tfrecord_label_offset = settings_.tfrecord_label_offset;
        options.records.skip_corrupt = settings_.skip_corrupt;
        options.records.num_classes = classes_;
        options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(data_timeout_);
        data::PipeRendezvous rendezvous = data::listen_for_ranks(local_size);
        message = rendezvous.name;
        pipe_dealer_ = std::make_unique<data::PipeDealer>(std::move(rendezvous), std::move(options));
      } catch (const std::exception& error) {
        message = error.what();
        header[0] = 1;
      }
      header[1] = static_cast<int64_t>(message.size());
    }
    MPI_CHECK(MPI_Bcast(header, 2, MPI_INT64_T, 0, host));
    message.resize(static_cast<size_t>(header[1]));
    MPI_CHECK(MPI_Bcast(message.data(), static_cast<int>(header[1]), MPI_CHAR, 0, host));
    MPI_CHECK(MPI_Comm_free(&host));
    if (header[0] != 0) throw data::DataError(message);
    pipe_feed_ = std::make_shared<data::PipeFeed>(message, local_rank, settings_.pipe_channel,
                                                  std::chrono::duration_cast<std::chrono::milliseconds>(data_timeout_));
    return pipe_feed_;
  }

  // TRAIN_SAMPLE_LOG=DIR: every rank appends one line per step to DIR/rank-R.txt naming the samples it
  // trained on (a diagnostic: the tests check with it that every sample is used once per epoch).
  void open_sample_log() {
    auto dir = lookup(current_environment(), "TRAIN_SAMPLE_LOG");
    if (!dir || dir->empty()) return;
    const auto path = std::filesystem::path(*dir) / fmt::format("rank-{}.txt", identity_.rank);
    sample_log_.reset(std::fopen(path.c_str(), "a"));
    if (!sample_log_) {
      throw ConfigError(fmt::format("TRAIN_SAMPLE_LOG: cannot append to {}: {}", path.string(), std::strerror(errno)));
    }
  }

  void log_samples(const data::Batch& batch, bool padding) {
    fmt::print(sample_log_.get(), "epoch={} step={} padding={} labels={} samples={} repeats={}\n",
               batch.position.epoch, step_, padding ? 1 : 0, fmt::join(batch.labels, ","),
               fmt::join(batch.samples, ","), fmt::join(batch.repeats, ","));
    std::fflush(sample_log_.get());
  }

  // The training loop of Pipe mode. A rank's share of an epoch is known to be over only when its stream
  // says so, and with ShardedByS3Key hosts' streams may differ in length; so before each step the ranks
  // vote: the epoch goes on while any rank still has a batch of it, and a rank whose share is done trains
  // its first batch of the epoch again meanwhile (its gradient still counts, as DistributedSampler's
  // padding does). The epoch ends when no rank has a batch of it left.
  int run_pipe(data::BatchLoader& loader, MpiGradientReducer& reducer) {
    if (identity_.rank == 0 && settings_.shuffle) {
      log_info("note: Pipe mode trains on the records in the order the channel streams them; the shuffle "
               "hyperparameter applies to File and FastFile mode (shuffle a Pipe-mode channel with its ShuffleConfig)");
    }
    int64_t epoch = resume_position_.epoch;
    int64_t steps_in_epoch = resume_position_.index / settings_.batch_per_rank;
    data::Batch pending, first;
    bool have_pending = false, have_first = false, last_epoch_closed = false;
    last_log_ = clock::now();
    start_ = last_log_;
    steps_at_start_ = step_;
    while (settings_.max_steps == 0 || step_ < settings_.max_steps) {
      if (!have_pending) have_pending = next_batch(loader, pending);
      const bool in_epoch = have_pending && pending.position.epoch == epoch;
      int64_t ranks_with_data = in_epoch ? 1 : 0;
      bounded_allreduce(&ranks_with_data, 1, MPI_INT64_T, MPI_SUM, comm_, step_timeout_ms(),
                        "the vote on the end of a Pipe-mode epoch");
      if (ranks_with_data == 0) {
        if (identity_.rank == 0 && steps_in_epoch != steps_per_epoch_) {
          log_info("note: Pipe-mode epoch {} took {} steps, but num_training_samples={} implies {}; the learning-rate "
                   "schedule assumes {}: set num_training_samples to the number of records the channel streams",
                   epoch, steps_in_epoch, *settings_.num_training_samples, steps_per_epoch_, steps_per_epoch_);
        }
        end_of_epoch(epoch);
        ++epoch;
        steps_in_epoch = 0;
        have_first = false;
        if (epoch >= settings_.epochs) {
          last_epoch_closed = true;
          break;
        }
        continue;
      }
      const data::Batch* batch = &pending;
      const bool padding = !in_epoch;
      if (in_epoch) {
        if (!have_first) {
          first = pending;
          have_first = true;
        }
        have_pending = false;
        epoch_corrupt_skipped_ += pending.corrupt_skipped;
      } else if (have_first) {
        batch = &first;
      } else {
        throw data::DataError(fmt::format(
            "Pipe-mode channel {}: rank {} received no records in epoch {} while other ranks did: with ShardedByS3Key "
            "every host needs at least one batch per rank ({} records per host here); spread the objects more evenly "
            "over the hosts or use FullyReplicated",
            settings_.pipe_channel, identity_.rank, epoch, int64_t{settings_.batch_per_rank} * identity_.local_size));
      }
      const bool stop = train_one_step(*batch, reducer, padding);
      ++steps_in_epoch;
      // Every rank is at the same step of the epoch; a resumed job skips that many batches of each share.
      if (stop) return stop_with_checkpoint(data::DataPosition{epoch, steps_in_epoch * settings_.batch_per_rank});
    }
    if (!last_epoch_closed) end_of_epoch(epoch, /*complete=*/false);
    return finish_training();
  }

  void open_data() {
    if (settings_.pipe) {
      // The stream is read once training starts (open_pipe); its classes are the hyperparameter's.
      classes_ = *settings_.num_classes;
      return;
    }
    if (settings_.data_format == "synthetic") {
      const int classes = settings_.num_classes.value_or(1000);
      train_source_ = std::make_shared<data::SyntheticSource>(synthetic_samples, classes, settings_.height, settings_.width);
    } else {
      // The format is detected per channel (data_channel.h) unless data_format names one.
      data::DataOptions options;
      options.image.height = settings_.height;
      options.image.width = settings_.width;
      options.image.augmentation = data::parse_augmentation(settings_.augmentation);
      options.tfrecord_label_offset = settings_.tfrecord_label_offset;
      options.skip_corrupt = settings_.skip_corrupt;
      options.share_index = [this](const std::function<data::RecordIndex()>& build) {
        return index_once_per_host(comm_, build);
      };
      const auto format = data::parse_data_format(settings_.data_format);
      auto list_dir = [](const std::optional<std::filesystem::path>& dir) {
        return dir ? std::optional<std::string>(dir->string()) : std::nullopt;
      };
      auto training = data::open_channel(settings_.train_dir.string(), list_dir(settings_.train_list_dir), format, options);
      report_corrupt_at_open("training", training, /*training=*/true);
      class_names_ = training.class_names;
      train_source_ = std::const_pointer_cast<data::SampleSource>(training.source);
      if (settings_.validation_dir) {
        options.image.augmentation = data::Augmentation::none;
        auto validation = data::open_channel(settings_.validation_dir->string(), list_dir(settings_.validation_list_dir),
                                             format, options, &training);
        report_corrupt_at_open("validation", validation, /*training=*/false);
        validation_source_ = std::const_pointer_cast<data::SampleSource>(validation.source);
      }
    }
    classes_ = settings_.num_classes.value_or(train_source_->num_classes());
    if (train_source_->num_classes() > classes_) {
      throw ConfigError(fmt::format("hyperparameter `num_classes` is {} but the training data has {} classes; "
                                    "raise num_classes or leave it out to take it from the data",
                                    classes_, train_source_->num_classes()));
    }
    if (validation_source_ && validation_source_->num_classes() > classes_) {
      throw ConfigError(fmt::format("the validation data has labels up to {} but the model has {} classes; the "
                                    "validation labels must be classes of the training data",
                                    validation_source_->num_classes() - 1, classes_));
    }
  }

  // Corrupt records found while indexing (skip_corrupt=true): every rank indexes the same files, so rank 0 speaks.
  void report_corrupt_at_open(const char* channel, const data::OpenedData& opened, bool training) {
    if (training) corrupt_at_open_ = opened.corrupt_at_open;
    if (identity_.rank != 0 || opened.corrupt_at_open == 0) return;
    log_info("{} data: skipped {} corrupt record{} while indexing {}", channel, opened.corrupt_at_open,
             opened.corrupt_at_open == 1 ? "" : "s", opened.layout.root);
    for (const auto& note : opened.corrupt_notes) log_info("  skipped: {}", note);
  }

  void build_model() {
    model_ = std::make_unique<CpuResNet<float>>(build_resnet_spec(settings_.depth, classes_), settings_.batch_per_rank,
                                                settings_.height, settings_.width, settings_.bucket_bytes);
    model_->initialize(settings_.seed);
    momentum_.assign(model_->all_values().size(), 0.0f);
    if (settings_.weights_dir) load_initial_weights();
    resume_if_checkpointed();
    for (int p = 0; p < model_->parameter_tensors(); ++p) {
      const auto& parameter = model_->parameters()[static_cast<size_t>(p)];
      ops::SgdTensor<float> tensor;
      tensor.param = model_->parameter_data(p);
      tensor.grad = model_->gradient_data(p);
      tensor.momentum_buffer = momentum_.data() + parameter.offset;
      tensor.count = parameter.count;
      tensor.weight_decay = model_->spec().tensors[static_cast<size_t>(parameter.spec_index)].decays();
      sgd_tensors_.push_back(tensor);
    }
  }

  void load_initial_weights() {
    const auto path = *settings_.weights_dir / std::string(model_io::model_weights_file_name);
    auto file = model_io::read_safetensors(path.string());
    auto selected = model_io::select_initial_weights(file, path.string(), expected_tensors(model_->spec()),
                                                     fmt::format("resnet{}", settings_.depth));
    import_model_state(*model_, selected.tensors);
    if (identity_.rank == 0) {
      log_info("started from the weights in {}", path.string());
      for (const auto& note : selected.notes) log_info("{}", note);
    }
  }

  nlohmann::json checkpoint_identity() const {
    return {{"num_layers", settings_.depth},
            {"num_classes", classes_},
            {"image_shape", {3, settings_.height, settings_.width}},
            {"seed", settings_.seed},
            {"batch_per_rank", settings_.batch_per_rank},
            {"shuffle", settings_.shuffle},
            {"data_ranks", settings_.data_ranks}};
  }

  // Rank 0's checkpoint, sent to every rank: on several hosts only the master's checkpoint directory holds
  // it (rank 0 writes it there), and all ranks must resume from the same one.
  std::optional<model_io::Checkpoint> shared_checkpoint(const std::string& source) {
    std::string bytes;
    int64_t size = -1;
    if (identity_.rank == 0) {
      if (auto file = model_io::read_checkpoint_file(settings_.checkpoint_dir)) {
        bytes = std::move(*file);
        size = static_cast<int64_t>(bytes.size());
      }
    }
    MPI_CHECK(MPI_Bcast(&size, 1, MPI_INT64_T, 0, comm_));
    if (size < 0) return std::nullopt;
    bytes.resize(static_cast<size_t>(size));
    constexpr int64_t chunk = int64_t{1} << 30;
    for (int64_t offset = 0; offset < size; offset += chunk) {
      int count = static_cast<int>(std::min(chunk, size - offset));
      MPI_CHECK(MPI_Bcast(bytes.data() + offset, count, MPI_BYTE, 0, comm_));
    }
    return model_io::parse_checkpoint(bytes, source);
  }

  void resume_if_checkpointed() {
    const auto source = model_io::checkpoint_path(settings_.checkpoint_dir).string();
    auto checkpoint = shared_checkpoint(source);
    if (!checkpoint) return;
    if (auto refusal = model_io::resume_refusal(checkpoint->state, checkpoint_identity(), source)) {
      throw ConfigError(*refusal);
    }
    if (checkpoint->state.world_size != identity_.size) {
      throw ConfigError(fmt::format("{} was written by a job of {} ranks and this job has {}; its data position "
                                    "cannot carry over: remove it to start afresh, or run with {} ranks",
                                    source, checkpoint->state.world_size, identity_.size, checkpoint->state.world_size));
    }
    import_model_state(*model_, checkpoint->model);
    std::map<std::string, const model_io::Tensor*> momentum_by_name;
    for (const auto& tensor : checkpoint->momentum) momentum_by_name[tensor.name] = &tensor;
    for (int p = 0; p < model_->parameter_tensors(); ++p) {
      const auto& parameter = model_->parameters()[static_cast<size_t>(p)];
      const auto& spec = model_->spec().tensors[static_cast<size_t>(parameter.spec_index)];
      auto found = momentum_by_name.find(spec.name);
      if (found == momentum_by_name.end()) continue;  // no momentum yet (checkpoint before the first step)
      std::vector<float> values = found->second->to_float();
      if (spec.role == TensorRole::conv_weight) values = convert_conv_layout(values, spec.shape, false);
      std::copy(values.begin(), values.end(), momentum_.begin() + static_cast<int64_t>(parameter.offset));
    }
    step_ = checkpoint->state.step;
    resume_position_ = data::DataPosition{checkpoint->state.epoch,
                                          checkpoint->state.step_in_epoch * settings_.batch_per_rank};
    if (identity_.rank == 0) {
      log_info("resuming from {}: step {}, epoch {}, batch {} of that epoch", source, step_, checkpoint->state.epoch,
               checkpoint->state.step_in_epoch);
    }
  }

  void announce() const {
    if (identity_.rank != 0) return;
    log_info("training resnet{} ({} parameters) on {}x{} images, {} classes: {} ranks x {} images = global batch {}, "
             "{} steps per epoch, {} steps in all",
             settings_.depth, model_->spec().parameter_count(), settings_.height, settings_.width, classes_,
             identity_.size, settings_.batch_per_rank, settings_.global_batch, steps_per_epoch_, total_steps_);
    const std::string data =
        settings_.pipe ? fmt::format("Pipe-mode channel {} (FIFOs {}_N, one per epoch; {} records per epoch "
                                     "expected; dealt over {} rank{}{}), {} classes, augmentation {}, input {}x{}",
                                     settings_.pipe_channel, settings_.pipe_fifo_prefix.string(),
                                     *settings_.num_training_samples, settings_.data_ranks,
                                     settings_.data_ranks == 1 ? "" : "s",
                                     settings_.sharded ? " per host, ShardedByS3Key" : "", classes_,
                                     settings_.augmentation, settings_.height, settings_.width)
                       : train_source_->describe();
    log_info("data: {}; peak learning rate {} ({} scaled to global batch {}), {} decay, {} gradient buckets",
             data, schedule_.peak, settings_.learning_rate, settings_.global_batch,
             settings_.lr_scheduler, model_->bucket_plan().buckets.size());
  }

  // The next batch, waiting for the decoder in bounded slices; false at the end of the data.
  bool next_batch(data::BatchLoader& loader, data::Batch& batch) {
    const auto deadline = clock::now() + data_timeout_;
    while (true) {
      auto status = loader.next(batch, std::chrono::milliseconds(500));
      if (status == data::BatchLoader::Status::batch) return true;
      if (status == data::BatchLoader::Status::end || status == data::BatchLoader::Status::stopped) return false;
      if (clock::now() > deadline) {
        throw data::DataError(fmt::format("no training batch arrived within {} s (set TRAIN_DATA_TIMEOUT_SECONDS to "
                                          "wait longer): the data is unreadable or too slow",
                                          data_timeout_.count()));
      }
    }
  }

  // One optimizer step; returns true when the job agreed to stop after it.
  bool train_one_step(const data::Batch& batch, MpiGradientReducer& reducer, bool padding = false) {
    if (sample_log_) log_samples(batch, padding);
    const double lr = schedule_.at(step_);
    reducer.begin_step();
    auto result = model_->train_step(
        batch.images.data(), batch.labels.data(), batch.size, static_cast<float>(settings_.label_smoothing),
        1.0f / static_cast<float>(identity_.size), [&](int p) { reducer.tensor_ready(p); },
        [&] { reducer.progress(); });
    reducer.finish();
    ops::SgdOptions options;
    options.lr = lr;
    options.momentum = settings_.momentum;
    options.weight_decay = settings_.weight_decay;
    options.nesterov = settings_.optimizer == "nag";
    options.lars = settings_.optimizer == "lars";
    ops::sgd_step<float>(sgd_tensors_, options);
    ++step_;

    // One small allreduce carries the job-wide metrics and the stop vote, so every rank stops at the same step.
    double sums[4] = {result.loss * batch.size, static_cast<double>(batch.size), static_cast<double>(result.correct),
                      stop_requested() ? 1.0 : 0.0};
    bounded_allreduce(sums, 4, MPI_DOUBLE, MPI_SUM, comm_, step_timeout_ms(), "the step's metrics and stop vote");
    interval_loss_ += sums[0];
    interval_images_ += sums[1];
    interval_correct_ += sums[2];
    ++interval_steps_;
    const bool stop = sums[3] > 0;
    if (identity_.rank == 0 && (step_ <= 5 || step_ % 10 == 0 || step_ == total_steps_ || stop)) log_progress(lr, batch);
    return stop;
  }

  void log_progress(double lr, const data::Batch& batch) {
    const auto now = clock::now();
    const double interval = std::chrono::duration<double>(now - last_log_).count();
    const double since_start = std::chrono::duration<double>(now - start_).count();
    const double per_step = since_start / static_cast<double>(std::max<int64_t>(1, step_ - steps_at_start_));
    write_line(1, fmt::format("step={} epoch={} loss={:.6f} train_top1={:.4f} lr={:.6g} images_per_sec={:.1f} eta={}",
                              step_, batch.position.epoch, interval_loss_ / interval_images_,
                              interval_correct_ / interval_images_, lr,
                              interval > 0 ? interval_images_ / interval : 0.0,
                              format_duration(per_step * static_cast<double>(total_steps_ - step_))));
    last_log_ = now;
    interval_loss_ = interval_images_ = interval_correct_ = 0;
    interval_steps_ = 0;
  }

  // After the last step of `epoch` (or the last step of training, which may end an epoch part-way: then
  // `complete` is false and no end-of-epoch checkpoint is written).
  void end_of_epoch(int64_t epoch, bool complete = true) {
    if (settings_.skip_corrupt) report_corrupt(epoch);
    if (validation_source_) validate(epoch);
    const bool epoch_complete = complete;
    if (epoch_complete && settings_.checkpoint_frequency > 0 && (epoch + 1) % settings_.checkpoint_frequency == 0) {
      save_checkpoint(data::DataPosition{epoch + 1, 0}, fmt::format("end of epoch {}", epoch));
    }
  }

  // skip_corrupt=true: one line per epoch on rank 0 with the job's count (regex: corrupt_records_skipped=(\d+)).
  // Records found corrupt while indexing are left out of every epoch; those found when loading were replaced
  // in their batch by the next good sample (CorruptSkippingSource) and are counted each time it happens.
  void report_corrupt(int64_t epoch) {
    // counts[1]: corrupt records in Pipe-mode streams, counted by each host's reader: once for the job when
    // every host streams the same data (FullyReplicated), once per host when each streams its own part.
    int64_t counts[2] = {epoch_corrupt_skipped_, 0};
    epoch_corrupt_skipped_ = 0;
    if (pipe_feed_ && (identity_.rank == 0 || (settings_.sharded && identity_.local_rank == 0))) {
      counts[1] = pipe_feed_->corrupt_in_epoch(epoch);
    }
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT64_T, MPI_SUM, comm_));
    const int64_t in_batches = counts[0];
    const int64_t before_decoding = corrupt_at_open_ + counts[1];
    if (identity_.rank == 0) {
      write_line(1, fmt::format("epoch={} corrupt_records_skipped={} in_batches={} while_indexing={}", epoch,
                                in_batches + before_decoding, in_batches, before_decoding));
    }
  }

  void validate(int64_t epoch) {
    data::LoaderOptions options;
    options.batch_size = settings_.batch_per_rank;
    options.threads = std::max(1, settings_.threads);
    options.shuffle = false;
    options.rank = identity_.rank;
    options.ranks = identity_.size;
    options.epochs = 1;
    data::BatchLoader loader(validation_source_, options);
    std::vector<float> logits(static_cast<size_t>(settings_.batch_per_rank) * classes_);
    double counts[3] = {0, 0, 0};  // images, top-1 hits, top-5 hits
    data::Batch batch;
    const int64_t dataset = validation_source_->size();
    while (next_batch(loader, batch)) {
      model_->infer(batch.images.data(), batch.size, logits.data());
      for (int i = 0; i < batch.size; ++i) {
        // Samples that pad the last ranks' shards repeat earlier ones: count every image once.
        const int64_t global_position = identity_.rank + identity_.size * (batch.position.index + i);
        if (global_position >= dataset) continue;
        const float* row = logits.data() + static_cast<int64_t>(i) * classes_;
        const float truth = row[batch.labels[static_cast<size_t>(i)]];
        int better = 0;
        for (int c = 0; c < classes_; ++c) better += row[c] > truth ? 1 : 0;
        counts[0] += 1;
        counts[1] += better == 0 ? 1 : 0;
        counts[2] += better < 5 ? 1 : 0;
      }
    }
    bounded_allreduce(counts, 3, MPI_DOUBLE, MPI_SUM, comm_, step_timeout_ms(), "the validation counts");
    if (identity_.rank == 0) {
      write_line(1, fmt::format("epoch={} validation_top1={:.4f} validation_top5={:.4f} validation_images={}", epoch,
                                counts[1] / std::max(1.0, counts[0]), counts[2] / std::max(1.0, counts[0]),
                                static_cast<int64_t>(counts[0])));
    }
  }

  void save_checkpoint(const data::DataPosition& next, const std::string& why) {
    if (identity_.rank == 0) {
      model_io::CheckpointState state;
      state.step = step_;
      state.epoch = next.epoch;
      state.step_in_epoch = next.index / settings_.batch_per_rank;
      state.world_size = identity_.size;
      state.rng_state = fmt::format("seed={} (all randomness derives from the seed and the data position)", settings_.seed);
      state.identity = checkpoint_identity();
      state.version = TRAIN_VERSION;
      ExportedTensors model = export_model_state(*model_);
      ExportedTensors momentum;
      for (int p = 0; p < model_->parameter_tensors(); ++p) {
        const auto& parameter = model_->parameters()[static_cast<size_t>(p)];
        const auto& spec = model_->spec().tensors[static_cast<size_t>(parameter.spec_index)];
        std::vector<float> values(momentum_.begin() + static_cast<int64_t>(parameter.offset),
                                  momentum_.begin() + static_cast<int64_t>(parameter.offset) + parameter.count);
        if (spec.role == TensorRole::conv_weight) values = convert_conv_layout(values, spec.shape, true);
        momentum.add(spec.name, spec.shape, std::move(values));
      }
      model_io::write_checkpoint(settings_.checkpoint_dir, state, model.views(), momentum.views());
      log_info("checkpoint written at step {} ({}): {}", step_, why,
               model_io::checkpoint_path(settings_.checkpoint_dir).string());
    }
    bounded_barrier(comm_, step_timeout_ms(), "the barrier after writing a checkpoint");
  }

  void write_model() {
    if (identity_.rank == 0) {
      model_io::ModelDescription description;
      description.num_layers = settings_.depth;
      description.num_classes = classes_;
      description.classes = class_names_.size() == static_cast<size_t>(classes_) ? class_names_ : std::vector<std::string>{};
      description.input_shape = {3, settings_.height, settings_.width};
      description.version = TRAIN_VERSION;
      ExportedTensors tensors = export_model_state(*model_);
      model_io::write_model_files(settings_.model_dir, tensors.views(), description);
      log_info("model written to {} after {} steps", settings_.model_dir.string(), step_);
    }
    bounded_barrier(comm_, step_timeout_ms(), "the barrier after writing the model");
  }

  std::string signal_description() const {
    int signal_number = stop_signal();
    return signal_number == 0 ? std::string("another rank's signal") : fmt::format("signal {}", signal_number);
  }

  const JobDescription& job_;
  RankIdentity identity_;
  MPI_Comm comm_;
  TrainingSettings settings_;
  std::chrono::seconds step_timeout_{900}, data_timeout_{600};
  std::chrono::milliseconds step_timeout_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(step_timeout_);
  }
  std::shared_ptr<data::SampleSource> train_source_, validation_source_;
  std::unique_ptr<data::PipeDealer> pipe_dealer_;  // Pipe mode, on the host's first rank: reads the FIFOs
  std::shared_ptr<data::PipeFeed> pipe_feed_;      // Pipe mode: this rank's records
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> sample_log_{nullptr, &std::fclose};
  std::vector<std::string> class_names_;
  int64_t corrupt_at_open_ = 0;        // training records skipped while indexing
  int64_t epoch_corrupt_skipped_ = 0;  // this rank's replaced samples in the current epoch's batches
  int classes_ = 0;
  std::unique_ptr<CpuResNet<float>> model_;
  std::vector<float> momentum_;
  std::vector<ops::SgdTensor<float>> sgd_tensors_;
  data::DataPosition resume_position_;
  int64_t step_ = 0, steps_at_start_ = 0, steps_per_epoch_ = 1, total_steps_ = 0;
  LearningRateSchedule schedule_;
  clock::time_point last_log_, start_;
  double interval_loss_ = 0, interval_images_ = 0, interval_correct_ = 0;
  int64_t interval_steps_ = 0;
};

}  // namespace

int run_cpu_training(const JobDescription& job, const RankIdentity& identity, MPI_Comm comm) {
  CpuTrainer trainer(job, identity, comm);
  return trainer.run();
}

}  // namespace train
