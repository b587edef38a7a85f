// Pipe mode's pieces: the record stream reader (TFRecord, gzip, RecordIO, RecordIO-wrapped objects,
// corrupt records), the FIFO stream's bounded waits, and the dealer handing a stream's records to ranks
// (round-robin, DistributedSampler padding, resume, errors reaching every rank).
#include "runtime/data/data_error.h"
#include "runtime/data/loader/batch_loader.h"
#include "runtime/data/loader/sampler.h"
#include "runtime/data/pipe/fifo_stream.h"
#include "runtime/data/pipe/pipe_dealer.h"
#include "runtime/data/records/record_stream.h"
#include "runtime/data/records/tfrecord.h"
#include "tests/unit/test_data_record_writers.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace train::data;
using namespace train::data::testing;

namespace {

// Distinct small "images" (the reader does not decode them).
Bytes image_bytes(int i) { return Bytes(static_cast<size_t>(10 + i), static_cast<uint8_t>(i)); }

Bytes tfrecord_stream(int first, int count) {
  Bytes out;
  for (int i = first; i < first + count; ++i) append(out, tfrecord(example(image_bytes(i), i + 1)));
  return out;
}

std::vector<StreamRecord> read_all(const Bytes& stream, StreamRecordOptions options = {}) {
  StreamRecordReader reader(std::make_unique<MemoryStream>(stream.data(), stream.size(), "stream"), options);
  std::vector<StreamRecord> records;
  StreamRecord record;
  while (reader.next(record)) records.push_back(record);
  return records;
}

void check_sequence(const std::vector<StreamRecord>& records, int count) {
  REQUIRE(records.size() == static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    CHECK(records[static_cast<size_t>(i)].label == i);
    CHECK(records[static_cast<size_t>(i)].image == image_bytes(i));
  }
}

// Writes `objects` back to back into the FIFO `path` (made here) from a thread, as SageMaker does.
std::thread feed_fifo(const std::string& path, std::vector<Bytes> objects) {
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  return std::thread([path, objects = std::move(objects)] {
    const int fd = ::open(path.c_str(), O_WRONLY);
    if (fd < 0) return;
    for (const auto& object : objects) {
      size_t done = 0;
      while (done < object.size()) {
        const ssize_t wrote = ::write(fd, object.data() + done, object.size() - done);
        if (wrote <= 0) break;
        done += static_cast<size_t>(wrote);
      }
    }
    ::close(fd);
  });
}

struct Dealt {
  std::vector<std::vector<FedRecord>> per_epoch;  // records of each epoch's share, in order
  std::string error;
};

// Runs a dealer over FIFOs <dir>/train_E and `ranks` feeds read on their own threads.
std::vector<Dealt> deal(const std::string& dir, int ranks, int epochs, int64_t skip = 0, int batch_size = 1) {
  PipeDealerOptions options;
  options.batch_size = batch_size;
  options.fifo_prefix = dir + "/train";
  options.epochs = epochs;
  options.first_epoch_skip = skip;
  options.deal_ranks = ranks;
  for (int rank = 0; rank < ranks; ++rank) options.deal_rank_of.push_back(rank);
  options.timeout = std::chrono::seconds(20);
  PipeRendezvous rendezvous = listen_for_ranks(ranks);
  const std::string name = rendezvous.name;
  PipeDealer dealer(std::move(rendezvous), options);
  std::vector<Dealt> dealt(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      Dealt& mine = dealt[static_cast<size_t>(rank)];
      try {
        PipeFeed feed(name, rank, "train", std::chrono::seconds(20));
        for (int epoch = 0; epoch < epochs; ++epoch) {
          mine.per_epoch.emplace_back();
          FedRecord record;
          while (feed.next(epoch, record)) mine.per_epoch.back().push_back(record);
        }
      } catch (const DataError& error) {
        mine.error = error.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return dealt;
}

}  // namespace

TEST_CASE("record stream: TFRecord, gzip and RecordIO streams are detected and read in order", "[data]") {
  check_sequence(read_all(tfrecord_stream(0, 5)), 5);
  // Objects each gzip-compressed, back to back: one multi-member gzip stream.
  Bytes gzipped = gzip(tfrecord_stream(0, 2));
  append(gzipped, gzip(tfrecord_stream(2, 3)));
  check_sequence(read_all(gzipped), 5);
  Bytes rec;
  for (int i = 0; i < 4; ++i) append(rec, recordio(image_record(image_bytes(i), static_cast<float>(i), i)));
  StreamRecordReader reader(std::make_unique<MemoryStream>(rec.data(), rec.size(), "rec"), {});
  CHECK(reader.format() == RecordFormat::recordio);
  check_sequence(read_all(rec), 4);
  StreamRecordOptions forced;
  forced.format = RecordFormat::tfrecord;
  CHECK_THROWS_AS(read_all(rec, forced), DataError);
  CHECK(read_all(Bytes{}).empty());
}

TEST_CASE("record stream: RecordWrapperType=RecordIO objects are unwrapped, multi-part wrappers too", "[data]") {
  // Two objects (TFRecord files), each wrapped in one RecordIO record; the second's bytes hold the
  // RecordIO magic at an aligned offset, so its wrapper is written in parts.
  Bytes second = tfrecord_stream(2, 2);
  Bytes with_magic = tfrecord(example(Bytes{0x0a, 0x23, 0xd7, 0xce, 0x0a, 0x23, 0xd7, 0xce}, 5));
  append(second, with_magic);
  Bytes wrapped = recordio(tfrecord_stream(0, 2));
  append(wrapped, recordio(second));
  StreamRecordOptions options;
  options.unwrap_recordio = true;
  const auto records = read_all(wrapped, options);
  REQUIRE(records.size() == 5);
  for (int i = 0; i < 4; ++i) CHECK(records[static_cast<size_t>(i)].image == image_bytes(i));
  CHECK(records[4].label == 4);
  // Without unwrapping the stream is RecordIO whose records are not image records: each is corrupt.
  StreamRecordOptions plain;
  CHECK_THROWS_AS(read_all(wrapped, plain), CorruptDataError);
}

TEST_CASE("record stream: corrupt records fail with offset, or are skipped and counted", "[data]") {
  Bytes stream = tfrecord_stream(0, 3);
  const size_t second = tfrecord(example(image_bytes(0), 1)).size();
  stream[second + kTfRecordHeaderBytes + 3] ^= 0xff;  // the second record's data: its checksum no longer matches
  try {
    read_all(stream);
    FAIL("no error");
  } catch (const CorruptDataError& error) {
    CHECK(error.offset() == second);
  }
  StreamRecordOptions skipping;
  skipping.skip_corrupt = true;
  StreamRecordReader reader(std::make_unique<MemoryStream>(stream.data(), stream.size(), "s"), skipping);
  StreamRecord record;
  std::vector<int> labels;
  while (reader.next(record)) labels.push_back(record.label);
  CHECK(labels == std::vector<int>{0, 2});
  CHECK(reader.corrupt().count() == 1);
  // A damaged length loses the framing: even skipping cannot go on, and says so.
  Bytes lost = tfrecord_stream(0, 3);
  lost[second] ^= 0xff;
  CHECK_THROWS_WITH(read_all(lost, skipping), Catch::Contains("framing is lost"));
  StreamRecordOptions classes;
  classes.num_classes = 2;
  CHECK_THROWS_WITH(read_all(tfrecord_stream(0, 3), classes), Catch::Contains("num_classes=2"));
  const Bytes garbage(64, 0x41);
  CHECK_THROWS_WITH(read_all(garbage), Catch::Contains("neither a TFRecord record nor the RecordIO magic"));
}

TEST_CASE("FIFO stream: waits for the FIFO are bounded, stoppable, and the bytes arrive whole", "[data]") {
  TempDir dir;
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(FifoStream(dir / "train_0", std::chrono::milliseconds(300), nullptr),
                    Catch::Contains(dir / "train_0") && Catch::Contains("did not appear"));
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  std::atomic<bool> stop{true};
  CHECK_THROWS_AS(FifoStream(dir / "never", std::chrono::seconds(60), &stop), FeedStopped);

  const Bytes payload = tfrecord_stream(0, 50);
  std::thread writer = feed_fifo(dir / "train_1", {payload});
  FifoStream stream(dir / "train_1", std::chrono::seconds(20), nullptr);
  Bytes read(payload.size() + 10);
  read.resize(stream.read_fully(read.data(), read.size()));
  writer.join();
  CHECK(read == payload);

  // A writer that opens and then goes silent: the wait for bytes is bounded too.
  REQUIRE(::mkfifo((dir / "train_2").c_str(), 0600) == 0);
  FifoStream silent(dir / "train_2", std::chrono::milliseconds(300), nullptr);
  const int fd = ::open((dir / "train_2").c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  uint8_t byte = 0;
  CHECK_THROWS_WITH(silent.read(&byte, 1), Catch::Contains("no data for"));
  ::close(fd);
}

TEST_CASE("pipe dealer: records dealt round-robin, shares padded as DistributedSampler, every epoch", "[data]") {
  TempDir dir;
  // 7 records over 3 ranks: shares of ceil(7/3) = 3; ranks 1 and 2 get records 0 and 1 again.
  std::thread first = feed_fifo(dir / "train_0", {tfrecord_stream(0, 4), tfrecord_stream(4, 3)});
  std::thread second = feed_fifo(dir / "train_1", {tfrecord_stream(0, 7)});
  const auto dealt = deal(dir.path().string(), 3, 2);
  first.join();
  second.join();
  const std::vector<std::vector<int64_t>> expected = {{0, 3, 6}, {1, 4, 0}, {2, 5, 1}};
  for (int rank = 0; rank < 3; ++rank) {
    const Dealt& mine = dealt[static_cast<size_t>(rank)];
    INFO("rank " << rank << " " << mine.error);
    REQUIRE(mine.error.empty());
    REQUIRE(mine.per_epoch.size() == 2);
    for (const auto& share : mine.per_epoch) {
      REQUIRE(share.size() == 3);
      for (size_t i = 0; i < 3; ++i) {
        const int64_t index = expected[static_cast<size_t>(rank)][i];
        CHECK(share[i].index == index);
        CHECK(share[i].label == index);
        CHECK(share[i].image == image_bytes(static_cast<int>(index)));
        CHECK(share[i].repeat == (rank > 0 && i == 2));
      }
    }
  }
}

TEST_CASE("pipe dealer: a resumed epoch skips what its ranks trained on, and errors reach every rank", "[data]") {
  TempDir dir;
  std::thread feeder = feed_fifo(dir / "train_0", {tfrecord_stream(0, 6)});
  const auto resumed = deal(dir.path().string(), 2, 1, /*skip=*/2);
  feeder.join();
  REQUIRE(resumed[0].error.empty());
  REQUIRE(resumed[0].per_epoch.at(0).size() == 1);
  CHECK(resumed[0].per_epoch[0][0].index == 4);
  CHECK(resumed[1].per_epoch.at(0).at(0).index == 5);

  TempDir broken;
  std::thread garbage = feed_fifo(broken / "train_0", {Bytes(100, 0x41)});
  const auto failed = deal(broken.path().string(), 2, 1);
  garbage.join();
  for (const auto& rank : failed) CHECK_THAT(rank.error, Catch::Contains("neither a TFRecord record"));
}

TEST_CASE("loader: a last batch of one image is completed to two with a marked repeat", "[data]") {
  auto source = std::make_shared<SyntheticSource>(5, 3, 4, 4);
  LoaderOptions options;
  options.batch_size = 2;
  options.epochs = 1;
  options.min_batch = 2;
  options.shuffle = false;
  BatchLoader loader(source, options);
  std::vector<Batch> batches;
  Batch batch;
  while (loader.next(batch, std::chrono::seconds(20)) == BatchLoader::Status::batch) batches.push_back(batch);
  REQUIRE(batches.size() == 3);
  CHECK(batches[2].size == 2);
  CHECK(batches[2].samples == std::vector<int64_t>{4, 0});
  CHECK(batches[2].repeats == std::vector<uint8_t>{0, 1});
  CHECK(batches[2].next == DataPosition{1, 0});
}

TEST_CASE("loader and sampler: a longer share than ceil(n/R) pads by going round the order", "[data]") {
  const std::vector<int64_t> order = {7, 8, 9};
  CHECK(shard_of(order, 1, 2, 4) == std::vector<int64_t>{8, 7, 9, 8});
  CHECK_THROWS_AS(shard_of(order, 0, 2, 1), std::invalid_argument);
  auto source = std::make_shared<SyntheticSource>(3, 3, 4, 4);
  LoaderOptions options;
  options.batch_size = 4;
  options.epochs = 1;
  options.shuffle = false;
  options.samples_per_epoch = 5;
  BatchLoader loader(source, options);
  Batch batch;
  REQUIRE(loader.next(batch, std::chrono::seconds(20)) == BatchLoader::Status::batch);
  CHECK(batch.samples == std::vector<int64_t>{0, 1, 2, 0});
  CHECK(batch.repeats == std::vector<uint8_t>{0, 0, 0, 1});
  REQUIRE(loader.next(batch, std::chrono::seconds(20)) == BatchLoader::Status::batch);
  CHECK(batch.samples == std::vector<int64_t>{1});
  CHECK(batch.repeats == std::vector<uint8_t>{1});
}

TEST_CASE("pipe dealer: a share whose last batch would hold one record gets its first record again", "[data]") {
  TempDir dir;
  // 5 records, 2 ranks, batches of 2: shares of 3 end in a batch of one, completed with records 0 and 1.
  std::thread first = feed_fifo(dir / "train_0", {tfrecord_stream(0, 5)});
  const auto dealt = deal(dir.path().string(), 2, 1, 0, 2);
  first.join();
  const std::vector<std::vector<std::pair<int64_t, bool>>> expected = {{{0, false}, {2, false}, {4, false}, {0, true}},
                                                                       {{1, false}, {3, false}, {0, true}, {1, true}}};
  for (int rank = 0; rank < 2; ++rank) {
    const auto& share = dealt[static_cast<size_t>(rank)].per_epoch.at(0);
    REQUIRE(share.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
      CHECK(share[i].index == expected[static_cast<size_t>(rank)][i].first);
      CHECK(share[i].repeat == expected[static_cast<size_t>(rank)][i].second);
    }
  }
  // Resumed after the share's last batch: nothing is left, not even the completion.
  TempDir after;
  std::thread second = feed_fifo(after / "train_0", {tfrecord_stream(0, 5)});
  const auto resumed = deal(after.path().string(), 2, 1, 4, 2);
  second.join();
  CHECK(resumed[0].per_epoch.at(0).empty());
  CHECK(resumed[1].per_epoch.at(0).empty());
}

TEST_CASE("record stream: a broken gzip stream ends with an error even with skip_corrupt", "[data]") {
  Bytes damaged = gzip(tfrecord_stream(0, 40));
  damaged.resize(damaged.size() / 2);  // truncated mid-stream
  damaged[damaged.size() / 2] ^= 0x5a;  // and damaged before that
  StreamRecordOptions skipping;
  skipping.skip_corrupt = true;
  // Whatever records come out before the damage, the reader must end (here: with an error), not loop.
  CHECK_THROWS_AS(read_all(damaged, skipping), DataError);
}
