// The training data pipeline's front: batches of a rank's shard, decoded and augmented on a small pool
// of threads up to `prefetch_batches` batches ahead of the caller.
//
//   auto source = std::make_shared<ImageFolderSource>(scan_image_folder(dir), ImageFolderOptions{...});
//   BatchLoader loader(source, LoaderOptions{.batch_size = 64, .seed = seed, .rank = r, .ranks = R});
//   Batch batch;
//   while (loader.next(batch, std::chrono::seconds(1)) != BatchLoader::Status::end) { ... }
//
// Order: each epoch's samples are this rank's DistributedSampler shard (sampler.h), cut into batches in
// order; epochs follow one another without a gap. Determinism: a batch's contents depend only on the
// source, the options and its position (never on the number of threads or their timing), so the same
// seed gives bit-identical batches, and a loader started at a position another one reached returns the
// same batches from there on (checkpoint Batch::next, resume with LoaderOptions::start).
// Threads: the pool decodes the samples of the oldest unfinished batches first; the queue holds at most
// prefetch_batches batches; every wait is bounded (next) or interruptible (stop); the destructor stops
// and joins every thread, except one stuck in a system call that never returns (below, ~BatchLoader). Errors: a sample that fails (unreadable or undecodable file) makes next()
// throw DataError with the file's path and the reason when its batch comes up, and every later next()
// throws the same error.
//
// Streams (Pipe mode): constructed with a RecordFeed instead of a source, the loader reads each batch's
// records from the feed in order on one extra thread (the stream cannot be read by index) and decodes
// them on the pool as above; a batch is as large as the feed allows (the last of an epoch's share may be
// smaller), and the epoch moves on when the feed says the share is done. Augmentation is keyed by the
// record's place in its epoch's stream, so the same stream and seed give the same batches.
#pragma once

#include "common/non_copyable.h"
#include "runtime/data/loader/host_memory.h"
#include "runtime/data/pipe/record_feed.h"
#include "runtime/data/sources/sample_source.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <string>
#include <vector>

namespace train::data {

// A place in the stream of batches: `index` samples of this rank's shard of `epoch` are behind it.
struct DataPosition {
  int64_t epoch = 0;
  int64_t index = 0;
  friend bool operator==(const DataPosition&, const DataPosition&) = default;
};

struct LoaderOptions {
  int batch_size = 32;        // images per batch on this rank
  int threads = 4;            // decoding threads
  int prefetch_batches = 2;   // batches decoded ahead (the queue's bound)
  bool shuffle = true;        // a seeded permutation per epoch; false: the dataset's order
  uint64_t seed = 0;          // all randomness derives from it
  int rank = 0;               // this rank among the ranks sharing the data
  int ranks = 1;
  bool drop_last = false;     // drop an epoch's final partial batch (the same on every rank)
  int64_t epochs = 0;         // end after epoch `epochs - 1`; 0: never end
  DataPosition start;         // where to start (a checkpoint's Batch::next)
  // Samples per epoch on every rank: 0 means ceil(n / ranks). A larger count pads further by repeating the
  // epoch's order (ShardedByS3Key hosts with fewer samples than the fullest host). With a feed: the
  // expected count, used only for batches_per_epoch().
  int64_t samples_per_epoch = 0;
  bool skip_corrupt = false;  // with a feed: an undecodable image is replaced by the next one of its batch
  // The fewest images in a batch: an epoch's last batch with fewer is completed with repeats of the
  // share's first samples (marked in Batch::repeats). Training asks for 2: batch norm needs two values per
  // channel, and at small inputs the last stage's maps are 1x1. (With a feed, the Pipe dealer does this,
  // since only it still holds a share's first record when a job resumes mid-epoch.)
  int min_batch = 1;
  // The timeline's observer (loader_timing.h): while it is active, each decoding thread times its samples
  // and reports each batch's piece of its work. Null: nothing is timed.
  std::shared_ptr<LoaderObserver> observer;
};

struct Batch {
  DataPosition position;          // where this batch starts
  DataPosition next;              // where the batch after it starts: what a checkpoint stores
  int size = 0;                   // images (batch_size, or fewer for an epoch's last batch)
  int height = 0;
  int width = 0;
  HostFloats images;              // size x height x width x 3 (NHWC), normalised; pinned on GPU hosts
  std::vector<int32_t> labels;    // size
  std::vector<int64_t> samples;   // size: the dataset index of every image (with a feed: its stream place)
  std::vector<uint8_t> repeats;   // size: 1 where the image pads a share by repeating an earlier one
  int64_t corrupt_skipped = 0;    // corrupt samples replaced in this batch (skip_corrupt; see CorruptSkippingSource)
};

class BatchLoader : private NonCopyable {
 public:
  enum class Status { batch, end, timed_out, stopped };

  BatchLoader(std::shared_ptr<const SampleSource> source, const LoaderOptions& options);
  // Batches from a stream of records decoded and augmented per `image`.
  BatchLoader(std::shared_ptr<RecordFeed> feed, const ImageFolderOptions& image, const LoaderOptions& options);
  // Stops the threads and joins them, giving a thread busy with a sample until that sample's load has lasted
  // `abandon_after`. A thread still blocked then (in a read of a stalled network file system, say, or an
  // open() of a FIFO nobody writes) cannot be interrupted: it is detached and left behind, and the state it
  // shares is freed when it returns, if ever (the process usually ends first: such a loader is the failing
  // rank's, whose data timeout fired on that read).
  ~BatchLoader();

  // Waits at most `timeout` for the next batch. Status::batch: `batch` holds it (its old buffers are
  // recycled by the loader, so pass the same Batch every time to avoid allocations). end: the last
  // epoch is done. timed_out: not ready yet, call again. stopped: stop() was called. Throws DataError
  // when a sample of the batch failed.
  Status next(Batch& batch, std::chrono::milliseconds timeout);

  // Asks the threads to finish the sample in hand and exit, and wakes a waiting next(). Thread-safe.
  void stop();

  // The samples a thread has been loading for longer than `longer_than`, named as the source names them
  // (an image's path; a record's file and byte offset), each with how long: what a timeout reports.
  std::vector<std::string> stalled_samples(std::chrono::milliseconds longer_than) const;

  DataPosition position() const;     // where the batch that next() returns next starts
  int64_t shard_size() const;        // samples per epoch on this rank: ceil(n / ranks)
  int64_t batches_per_epoch() const;
  const SampleSource& source() const;  // not with a feed
  const LoaderOptions& options() const;

  // How long a sample's load may last before the destructor leaves its thread behind.
  static constexpr std::chrono::seconds abandon_after{5};

 private:
  class SharedState;  // everything the threads touch, owned jointly by the loader and its threads
  void start_threads();

  std::shared_ptr<SharedState> shared_;
  std::vector<std::thread> threads_;
};

}  // namespace train::data
