// Pipe mode on one host: one reader (the dealer, a thread in the host's first rank) reads the channel's
// FIFOs, one per epoch, and deals the records to the host's ranks over local sockets as they stream; each
// rank's PipeFeed receives its own. Nothing is read twice and no rank reads a FIFO itself (a FIFO read by
// several processes would split its bytes between them arbitrarily).
//
// Dealing, for an epoch whose stream holds n records and `deal_ranks` ranks sharing it (all the job's ranks
// for FullyReplicated, where every host streams the whole channel; the host's ranks for ShardedByS3Key):
// record k goes to deal rank k mod deal_ranks, exactly as DistributedSampler with shuffle off deals the
// same records in File mode; at the end of the stream every rank's share is padded to ceil(n / deal_ranks)
// by repeating records from the start of the stream (record p mod n for the missing places p), as
// DistributedSampler pads; a share whose last batch would hold one record gets its first record again
// (batch norm needs two). A resumed epoch skips the places its ranks already trained on.
//
// Wire format on each socket, dealer to rank: frames of a 24-byte header {uint32 kind, int32 label,
// int64 index, uint64 size} and `size` bytes: a record (its encoded image), a repeated record, the end of
// the rank's share of an epoch (index = epoch; 8 bytes: corrupt records skipped in the stream), or an error
// or a wait that ran out (its message). Rank to dealer, once after connecting: its local rank as an int32.
#pragma once

#include "common/non_copyable.h"
#include "runtime/data/pipe/record_feed.h"
#include "runtime/data/records/record_stream.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace train::data {

struct PipeDealerOptions {
  std::string fifo_prefix;        // "/opt/ml/input/data/train": FIFOs are <prefix>_0, <prefix>_1, ...
  int64_t first_epoch = 0;        // the epoch FIFO _0 holds (a resumed job starts at its checkpoint's)
  int64_t epochs = 1;             // deal epochs first_epoch .. epochs - 1
  int64_t first_epoch_skip = 0;   // places per rank of the first epoch already trained on (resume)
  int deal_ranks = 1;
  // The ranks' batch size: a share whose last batch would hold a single record gets the share's first
  // record once more (marked a repeat), as the batch loader completes a File-mode share (min_batch 2).
  int batch_size = 1;
  std::vector<int> deal_rank_of;  // per local rank: its deal rank
  StreamRecordOptions records;
  std::chrono::milliseconds timeout{600000};  // for the FIFO, each wait for bytes, and the ranks' connections
};

// A listening local socket the host's ranks connect to; its name goes to them (over MPI) for connect().
struct PipeRendezvous {
  int fd = -1;
  std::string name;  // an abstract socket address (per network namespace, so per simulated host too)
};
PipeRendezvous listen_for_ranks(int ranks);

class PipeDealer : private NonCopyable {
 public:
  // Takes ownership of the listening socket; starts the dealing thread.
  PipeDealer(PipeRendezvous rendezvous, PipeDealerOptions options);
  ~PipeDealer();  // stops and joins the thread

 private:
  void run();
  void deal_epoch(int64_t epoch, int64_t fifo_number, int64_t skip);
  void send(int local_rank, uint32_t kind, int32_t label, int64_t index, const uint8_t* data, uint64_t size);
  void send_error_to_all(const std::string& message, uint32_t kind);  // an error or a timeout frame

  PipeRendezvous rendezvous_;
  PipeDealerOptions options_;
  std::vector<int> sockets_;  // per local rank
  std::vector<int> local_of_deal_rank_;  // per deal rank: its local rank on this host, or -1
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One rank's end of the dealing: a RecordFeed over its socket.
class PipeFeed : public RecordFeed {
 public:
  PipeFeed(const std::string& rendezvous_name, int local_rank, std::string channel, std::chrono::milliseconds timeout);
  ~PipeFeed() override;
  bool next(int64_t epoch, FedRecord& record) override;
  void stop() override { stop_ = true; }
  std::string describe() const override { return "Pipe-mode channel " + channel_; }
  // Corrupt records the host's reader skipped in `epoch`'s stream (as its end frame said; 0 before that).
  int64_t corrupt_in_epoch(int64_t epoch) const;

 private:
  void receive(void* data, size_t size);
  int fd_ = -1;
  std::string channel_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> stop_{false};
  mutable std::mutex corrupt_mutex_;
  std::map<int64_t, int64_t> corrupt_by_epoch_;
};

}  // namespace train::data
