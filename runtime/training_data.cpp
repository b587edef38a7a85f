#include "runtime/training_data.h"

#include "common/config_error.h"
#include "common/environment_error.h"
#include "common/fnv1a.h"
#include "common/log.h"
#include "common/memory_facts.h"
#include "job/hyperparameter_schema.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/comm/broadcast_text.h"
#include "runtime/comm/gather_text.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/data/data_error.h"
#include "runtime/data/loader/sampler.h"
#include "runtime/data/sources/data_channel.h"
#include "runtime/data/sources/image_folder.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>

namespace train {

namespace {

// ImageNet-1k's training set size: synthetic data behaves like an epoch of it.
constexpr int64_t synthetic_samples = 1281167;

// This host's ranks, for as long as it is in scope.
class HostRanks {
 public:
  explicit HostRanks(MPI_Comm comm) {
    MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm_));
  }
  ~HostRanks() {
    // Not MPI_CHECK: a destructor may run while another error unwinds; a failure here is only reported.
    if (const int code = MPI_Comm_free(&comm_); code != MPI_SUCCESS) {
      log_error("MPI_Comm_free of the host's ranks failed (MPI error {})", code);
    }
  }
  HostRanks(const HostRanks&) = delete;
  HostRanks& operator=(const HostRanks&) = delete;
  MPI_Comm comm() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// How a built index travels from rank 0 of a group to its other ranks.
using SendText = std::function<void(std::string&, MPI_Comm)>;

// Runs `build` on rank 0 of `group` and sends its result, serialized, to the group's other ranks, with the
// builder's host name (`built_on`), into `index`. A failure fails every rank of the group with the same
// message (rank 0 rethrows the exception itself). With `travels`, an index it refuses stays on rank 0 (the
// others get nothing): then false on every rank.
template <typename Index>
bool built_by_one(MPI_Comm group, const std::function<Index()>& build, std::string (*serialize)(const Index&),
                  Index (*parse)(const std::string&), const SendText& send, const std::string& host,
                  std::string& built_on, Index& index, bool (*travels)(const Index&) = nullptr) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(group, &rank));
  std::exception_ptr failure;
  // 'k' (built), 'h' (built, but it stays here), 'd' (the data's failure) or 'm' (the machine's: a full or
  // read-only TMPDIR), the builder's host, NUL, then the serialized index or the failure's message.
  std::string message;
  if (rank == 0) {
    try {
      index = build();
      message = travels != nullptr && !travels(index) ? 'h' + host + '\0' : 'k' + host + '\0' + serialize(index);
    } catch (const std::exception& error) {
      failure = std::current_exception();
      const bool machine = dynamic_cast<const EnvironmentError*>(&error) != nullptr;
      message = (machine ? 'm' : 'd') + host + '\0' + error.what();
    }
  }
  send(message, group);
  if (failure) std::rethrow_exception(failure);
  const size_t end_of_host = message.find('\0');
  if (message.empty() || end_of_host == std::string::npos) {
    throw std::logic_error("an index sent between ranks lacks its header");
  }
  built_on = message.substr(1, end_of_host - 1);
  const char status = message[0];
  message.erase(0, end_of_host + 1);
  if (status == 'm') throw EnvironmentError(message);
  if (status == 'h') return false;
  if (status != 'k') throw data::DataError(message);
  if (rank != 0) index = parse(message);
  return true;
}

// An index that names only files every host has: none inflated into this host's TMPDIR.
bool readable_on_every_host(const data::RecordIndex& index) {
  return std::none_of(index.files.begin(), index.files.end(), [](const data::RecordFile& f) { return f.temporary; });
}

SendText bounded_send(std::chrono::milliseconds timeout) {
  return [timeout](std::string& text, MPI_Comm group) {
    comm::bounded_broadcast_text(text, group, timeout, "sending the channel's index from rank 0");
  };
}

void send_unbounded(std::string& text, MPI_Comm group) { comm::broadcast_text(text, group); }

// Says, once per host, where the index of `channel` came from.
void report_index_origin(const char* channel, const std::string& built_on, MPI_Comm group, const RankIdentity& identity,
                         const std::string& host, const char* scope) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(group, &rank));
  MPI_CHECK(MPI_Comm_size(group, &size));
  if (rank == 0) {
    log_info("{} data: indexed here, on host {}{}", channel, host,
             size > 1 ? fmt::format(", and sent to {} other rank{} ({})", size - 1, size == 2 ? "" : "s", scope) : "");
  } else if (identity.local_rank == 0 && built_on != host) {
    log_info("{} data: received the index from host {} ({}); this host did not index the files itself", channel,
             built_on, scope);
  }
}

// A FullyReplicated channel indexed on every host (gzip shards, inflated into each host's TMPDIR): every host
// must have found the same records, or the hosts would train on different data sets while the job's sharding
// takes them for one. Compared by a checksum of every record's length and label, in order. Collective; throws on
// every rank.
void agree_on_replicated_index(const data::RecordIndex& index, MPI_Comm comm, std::chrono::milliseconds timeout,
                               const char* channel, const std::string& host) {
  Fnv1a64 digest;
  for (const auto& entry : index.entries) {
    digest.add(&entry.length, sizeof entry.length);
    digest.add(&entry.label, sizeof entry.label);
  }
  const uint64_t mine = digest.value();
  const auto as_signed = static_cast<int64_t>(mine);  // compared only for equality
  const auto [lowest, highest] =
      comm::bounded_min_max(as_signed, as_signed, comm, timeout, "the hosts' indexes of a replicated channel");
  if (lowest == highest) return;
  throw data::DataError(fmt::format(
      "FullyReplicated: the {} channel holds other records on host {} than on another host ({} records in {}, "
      "checksum {:016x}); FullyReplicated means every host holds the same objects: give every host the same data "
      "(one S3 prefix), or make the channel ShardedByS3Key if each host is meant to hold its own part",
      channel, host, index.size(), index.root, mine));
}

// Record files are indexed once, not once per rank (indexing reads a TFRecord data set through). With
// FullyReplicated (`whole_job`) rank 0 indexes them and sends the index to every rank of the job (the wait
// bounded by `timeout`), unless it names gzip shards inflated into rank 0's TMPDIR, which the other hosts
// cannot read: then, as with ShardedByS3Key (every host holds other files), the first rank of each host
// indexes and sends the index to the host's other ranks (rank 0 keeps the one it made). A failure to index
// fails every rank that waited for that index with the same message.
data::RecordIndex index_once(MPI_Comm comm, bool whole_job, std::chrono::milliseconds timeout,
                             const std::function<data::RecordIndex()>& build, const char* channel,
                             const RankIdentity& identity, const std::string& host) {
  std::string built_on;
  data::RecordIndex kept;  // rank 0's, when it could not travel
  std::function<data::RecordIndex()> build_here = build;
  if (whole_job) {
    data::RecordIndex index;
    if (built_by_one(comm, build, &data::serialize_record_index, &data::parse_record_index, bounded_send(timeout),
                     host, built_on, index, &readable_on_every_host)) {
      report_index_origin(channel, built_on, comm, identity, host, "FullyReplicated: read once per job");
      return index;
    }
    int rank = 0;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    if (rank == 0) {
      kept = std::move(index);
      build_here = [&kept] { return std::move(kept); };
    }
  }
  const HostRanks ranks(comm);
  data::RecordIndex index;
  built_by_one(ranks.comm(), build_here, &data::serialize_record_index, &data::parse_record_index, send_unbounded,
               host, built_on, index);
  // Every rank of the host opens the inflated gzip shards, then the folder goes: from here on no rank's
  // death, SIGKILL included, can leave them on the disk.
  std::exception_ptr not_held;
  try {
    data::hold_temporary_files(index);
  } catch (const std::exception&) {
    not_held = std::current_exception();
  }
  MPI_CHECK(MPI_Barrier(ranks.comm()));
  index.inflated.reset();
  if (not_held) std::rethrow_exception(not_held);
  report_index_origin(channel, built_on, ranks.comm(), identity, host,
                      whole_job ? "gzip shards inflated on each host: indexed once per host" : "indexed once per host");
  if (whole_job) agree_on_replicated_index(index, comm, timeout, channel, host);
  return index;
}

// An image folder is walked by one rank, which sends the list of its files to the others: a million files
// are listed once, not once per rank. With FullyReplicated (`whole_job`) every host holds the same files, on
// a shared file system the very same ones: rank 0 walks them and sends the list to every rank of the job
// (the wait for it bounded by `timeout`: that host may vanish). With ShardedByS3Key each host holds its own
// part: each host's first rank walks it.
data::ImageFolder scan_once(MPI_Comm comm, bool whole_job, std::chrono::milliseconds timeout,
                            const std::function<data::ImageFolder()>& scan, const char* channel,
                            const RankIdentity& identity, const std::string& host) {
  std::string built_on;
  data::ImageFolder folder;
  if (whole_job) {
    built_by_one(comm, scan, &data::serialize_image_folder, &data::parse_image_folder, bounded_send(timeout), host,
                 built_on, folder);
    report_index_origin(channel, built_on, comm, identity, host, "FullyReplicated: walked once per job");
    return folder;
  }
  const HostRanks ranks(comm);
  built_by_one(ranks.comm(), scan, &data::serialize_image_folder, &data::parse_image_folder, send_unbounded, host,
               built_on, folder);
  report_index_origin(channel, built_on, ranks.comm(), identity, host, "walked once per host");
  return folder;
}

// ShardedByS3Key across hosts: every host's training channel must hold one format (a host of TFRecord files
// and one of class folders would label their samples by different rules). Collective; throws on every rank.
void agree_on_format(const data::ChannelLayout& layout, MPI_Comm comm, std::chrono::milliseconds timeout,
                     const std::string& host) {
  const auto mine = static_cast<int64_t>(layout.format);
  const auto [lowest, highest] = comm::bounded_min_max(mine, mine, comm, timeout, "the hosts' training data formats");
  if (lowest == highest) return;
  const auto other = static_cast<DataFormat>(mine == highest ? lowest : highest);
  throw data::DataError(fmt::format(
      "ShardedByS3Key: the hosts' training channels hold data of different formats: this host ({}) found {} in {} "
      "({}), another host {}; every host's part of the objects must be in one layout: store the data set in one "
      "format (or set the data_format hyperparameter to the one it is in)",
      host, data_format_name(layout.format), layout.root, layout.why, data_format_name(other)));
}

// Names each ended by NUL, which no folder name holds: the class lists that travel between ranks.
std::string joined_names(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += name + '\0';
  return text;
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  for (size_t begin = 0, end; (end = text.find('\0', begin)) != std::string::npos; begin = end + 1) {
    names.push_back(text.substr(begin, end - begin));
  }
  return names;
}

// ShardedByS3Key across hosts: the job's classes are every host's class subfolders, sorted (a name per
// label on every host, as one folder holding all the objects would have them). Collective.
std::vector<std::string> join_classes(const std::vector<std::string>& mine, MPI_Comm comm,
                                      std::chrono::milliseconds timeout, const RankIdentity& identity,
                                      const std::string& host) {
  const std::vector<std::string> texts =
      comm::gather_texts(joined_names(mine), comm, timeout, "the hosts' class folders");
  std::string joined;
  if (identity.rank == 0) {
    std::set<std::string> names;  // sorted by bytes, as the folders' own classes are
    for (const auto& text : texts) {
      for (auto& name : split_names(text)) names.insert(std::move(name));
    }
    joined = joined_names({names.begin(), names.end()});
  }
  comm::bounded_broadcast_text(joined, comm, timeout, "the job's classes");
  const std::vector<std::string> classes = split_names(joined);
  if (identity.local_rank == 0 && classes.size() != mine.size()) {
    log_info("training data: ShardedByS3Key: host {} holds {} of the job's {} classes; every label stands for the "
             "same class name on every host",
             host, mine.size(), classes.size());
  }
  return classes;
}

// Corrupt records found while indexing (skip_corrupt=true): every rank indexes the same files, so rank 0 speaks.
void report_corrupt_at_open(const char* channel, const data::OpenedData& opened, int rank) {
  if (rank != 0 || opened.corrupt_at_open == 0) return;
  log_info("{} data: skipped {} corrupt record{} while indexing {}", channel, opened.corrupt_at_open,
           opened.corrupt_at_open == 1 ? "" : "s", opened.layout.root);
  for (const auto& note : opened.corrupt_notes) log_info("  skipped: {}", note);
}

// What indexing the training channel cost this rank (time, and memory: the index's own count of its bytes,
// and how much the resident memory grew meanwhile), said once, by rank 0: every rank holds the same index.
void report_index(const data::OpenedData& opened, std::chrono::steady_clock::duration took,
                  std::optional<uint64_t> resident_before, int rank) {
  if (rank != 0) return;
  const int64_t samples = opened.source->size();
  const int64_t bytes = opened.source->index_bytes();
  const auto resident_after = own_resident_memory_bytes();
  log_info("data: training channel indexed in {:.2f} s: {} samples, index {:.1f} MB ({:.1f} bytes per sample{})",
           std::chrono::duration<double>(took).count(), samples, bytes / 1e6,
           static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(samples, 1)),
           resident_before && resident_after
               ? fmt::format("; resident memory grew {:.1f} MB", (static_cast<double>(*resident_after) -
                                                                  static_cast<double>(*resident_before)) / 1e6)
               : "");
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
    const auto share_as = [&](const char* channel, bool whole_job) {
      options.share_index = [this, channel, whole_job](const std::function<data::RecordIndex()>& build) {
        return index_once(comm_, whole_job, collective_timeout_, build, channel, identity_, settings_.host);
      };
      options.share_folder = [this, channel, whole_job](const std::function<data::ImageFolder()>& scan) {
        return scan_once(comm_, whole_job, collective_timeout_, scan, channel, identity_, settings_.host);
      };
    };
    share_as("training", !settings_.sharded);
    if (settings_.sharded && identity_.size > identity_.local_size) {  // each host its own part of the objects
      options.agree_on_format = [this](const data::ChannelLayout& layout) {
        agree_on_format(layout, comm_, collective_timeout_, settings_.host);
      };
      options.join_classes = [this](const std::vector<std::string>& mine) {
        return join_classes(mine, comm_, collective_timeout_, identity_, settings_.host);
      };
    }
    auto list_dir = [](const std::optional<std::filesystem::path>& dir) {
      return dir ? std::optional<std::string>(dir->string()) : std::nullopt;
    };
    const auto indexing = std::chrono::steady_clock::now();
    const auto resident_before = own_resident_memory_bytes();
    auto training = data::open_channel(settings_.train_dir.string(), list_dir(settings_.train_list_dir),
                                       settings_.data_format, options);
    report_index(training, std::chrono::steady_clock::now() - indexing, resident_before, identity_.rank);
    training_labels = training.labels;
    report_corrupt_at_open("training", training, identity_.rank);
    corrupt_at_open_ = training.corrupt_at_open;
    class_names_ = training.class_names;
    train_source_ = std::const_pointer_cast<data::SampleSource>(training.source);
    if (settings_.validation_dir) {
      options.image.augmentation = Augmentation::none;
      options.agree_on_format = nullptr;  // per host: its classes follow the training data's names
      options.join_classes = nullptr;
      share_as("validation", false);  // its distribution may differ from the training channel's: per host
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
  const auto [lowest, highest] =
      comm::bounded_min_max(mine.lowest, mine.highest, comm_, collective_timeout_, "the training data's labels");
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
                              .threads = std::max(1, settings_.loader_threads),
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
                                    .threads = std::max(1, settings_.loader_threads),
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
  const HostRanks host_ranks(comm_);
  const MPI_Comm host = host_ranks.comm();
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
