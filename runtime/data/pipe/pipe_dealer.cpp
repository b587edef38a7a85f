#include "runtime/data/pipe/pipe_dealer.h"

#include "runtime/data/data_error.h"
#include "runtime/data/pipe/fifo_stream.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <random>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace train::data {

namespace {

using clock = std::chrono::steady_clock;
constexpr int kSliceMs = 100;

enum FrameKind : uint32_t { kRecord = 1, kRepeat = 2, kEndOfShare = 3, kError = 4, kTimeout = 5 };

struct FrameHeader {
  uint32_t kind;
  int32_t label;
  int64_t index;
  uint64_t size;
};
static_assert(sizeof(FrameHeader) == 24);

sockaddr_un abstract_address(const std::string& name, socklen_t& length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // Abstract names start with a NUL byte and need no file: nothing to clean up after a crash.
  address.sun_path[0] = '\0';
  std::memcpy(address.sun_path + 1, name.data(), std::min(name.size(), sizeof(address.sun_path) - 2));
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

// Waits for `events` on `fd` in slices, throwing FeedStopped when `stop` is set and DataError (from
// `what`) past `deadline`.
void wait_for(int fd, short events, const std::atomic<bool>& stop, clock::time_point deadline,
              const std::function<std::string()>& what) {
  for (;;) {
    if (stop.load()) throw FeedStopped{};
    pollfd descriptor{fd, events, 0};
    const int ready = ::poll(&descriptor, 1, kSliceMs);
    if (ready > 0) return;
    if (ready < 0 && errno != EINTR) throw DataError(fmt::format("{}: poll failed: {}", what(), std::strerror(errno)));
    if (clock::now() > deadline) throw DataTimeout(what());
  }
}

}  // namespace

PipeRendezvous listen_for_ranks(int ranks) {
  PipeRendezvous rendezvous;
  std::random_device entropy;
  rendezvous.name = fmt::format("train-pipe-{}-{:08x}", ::getpid(), entropy());
  rendezvous.fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (rendezvous.fd < 0) throw DataError(fmt::format("Pipe mode: cannot create a local socket: {}", std::strerror(errno)));
  socklen_t length = 0;
  const sockaddr_un address = abstract_address(rendezvous.name, length);
  if (::bind(rendezvous.fd, reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
      ::listen(rendezvous.fd, ranks + 8) != 0) {
    const int error = errno;
    ::close(rendezvous.fd);
    throw DataError(fmt::format("Pipe mode: cannot listen on a local socket: {}", std::strerror(error)));
  }
  return rendezvous;
}

PipeDealer::PipeDealer(PipeRendezvous rendezvous, PipeDealerOptions options)
    : rendezvous_(std::move(rendezvous)), options_(std::move(options)) {
  if (options_.deal_ranks < 1 || options_.deal_rank_of.empty()) {
    throw std::invalid_argument("Pipe dealer: no ranks to deal to");
  }
  sockets_.assign(options_.deal_rank_of.size(), -1);
  local_of_deal_rank_.assign(static_cast<size_t>(options_.deal_ranks), -1);
  for (size_t local = 0; local < options_.deal_rank_of.size(); ++local) {
    local_of_deal_rank_.at(static_cast<size_t>(options_.deal_rank_of[local])) = static_cast<int>(local);
  }
  thread_ = std::thread([this] { run(); });
}

PipeDealer::~PipeDealer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (int fd : sockets_) {
    if (fd >= 0) ::close(fd);
  }
  if (rendezvous_.fd >= 0) ::close(rendezvous_.fd);
}

void PipeDealer::run() {
  try {
    // Every local rank connects and says which it is.
    const auto deadline = clock::now() + options_.timeout;
    size_t connected = 0;
    while (connected < sockets_.size()) {
      wait_for(rendezvous_.fd, POLLIN, stop_, deadline, [&] {
        return fmt::format("Pipe mode: only {} of the host's {} ranks connected to its reader within {} s", connected,
                           sockets_.size(), options_.timeout.count() / 1000);
      });
      const int fd = ::accept4(rendezvous_.fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      int32_t local_rank = -1;
      const ssize_t got = ::recv(fd, &local_rank, sizeof(local_rank), MSG_WAITALL);
      if (got != sizeof(local_rank) || local_rank < 0 || static_cast<size_t>(local_rank) >= sockets_.size() ||
          sockets_[static_cast<size_t>(local_rank)] >= 0) {
        ::close(fd);
        continue;
      }
      sockets_[static_cast<size_t>(local_rank)] = fd;
      ++connected;
    }
    for (int64_t epoch = options_.first_epoch; epoch < options_.epochs; ++epoch) {
      deal_epoch(epoch, epoch - options_.first_epoch, epoch == options_.first_epoch ? options_.first_epoch_skip : 0);
    }
  } catch (const FeedStopped&) {
  } catch (const DataTimeout& error) {
    send_error_to_all(error.what(), kTimeout);
  } catch (const std::exception& error) {
    send_error_to_all(error.what(), kError);
  }
}

void PipeDealer::deal_epoch(int64_t epoch, int64_t fifo_number, int64_t skip) {
  const std::string path = fmt::format("{}_{}", options_.fifo_prefix, fifo_number);
  StreamRecordReader reader(std::make_unique<FifoStream>(path, options_.timeout, &stop_), options_.records);
  const int64_t deal_ranks = options_.deal_ranks;
  const std::vector<int>& local_of = local_of_deal_rank_;
  std::vector<StreamRecord> head;  // the stream's first deal_ranks records: what padding repeats
  StreamRecord record;
  int64_t n = 0;
  while (reader.next(record)) {
    const int local = local_of[static_cast<size_t>(n % deal_ranks)];
    if (local >= 0 && n / deal_ranks >= skip) {
      send(local, kRecord, record.label, n, record.image.data(), record.image.size());
    }
    if (n < deal_ranks) head.push_back(record);
    ++n;
  }
  if (n == 0) {
    throw DataError(fmt::format("the Pipe-mode FIFO {} (epoch {}) held no usable records{}", path, epoch,
                                reader.corrupt().count() > 0
                                    ? fmt::format(" ({} corrupt ones skipped)", reader.corrupt().count())
                                    : std::string()));
  }
  const int64_t share = (n + deal_ranks - 1) / deal_ranks;
  for (int64_t p = n; p < share * deal_ranks; ++p) {
    const int local = local_of[static_cast<size_t>(p % deal_ranks)];
    if (local < 0 || p / deal_ranks < skip) continue;
    const StreamRecord& repeated = head[static_cast<size_t>(p % n)];
    send(local, kRepeat, repeated.label, p % n, repeated.image.data(), repeated.image.size());
  }
  // The share's first record is record d (d % n, when there are fewer records than ranks).
  if (options_.batch_size >= 2 && share % options_.batch_size == 1 && share >= skip) {
    for (int64_t d = 0; d < deal_ranks; ++d) {
      const int local = local_of[static_cast<size_t>(d)];
      if (local < 0) continue;
      const StreamRecord& first = head[static_cast<size_t>(d % n)];
      send(local, kRepeat, first.label, d % n, first.image.data(), first.image.size());
    }
  }
  const int64_t corrupt = reader.corrupt().count();
  for (size_t local = 0; local < sockets_.size(); ++local) {
    send(static_cast<int>(local), kEndOfShare, 0, epoch, reinterpret_cast<const uint8_t*>(&corrupt), sizeof(corrupt));
  }
}

void PipeDealer::send(int local_rank, uint32_t kind, int32_t label, int64_t index, const uint8_t* data, uint64_t size) {
  const int fd = sockets_[static_cast<size_t>(local_rank)];
  const FrameHeader header{kind, label, index, size};
  const auto deadline = clock::now() + options_.timeout;
  auto write_all = [&](const uint8_t* bytes, size_t count) {
    while (count > 0) {
      wait_for(fd, POLLOUT, stop_, deadline, [&] {
        return fmt::format("Pipe mode: local rank {} took no data for {} s", local_rank, options_.timeout.count() / 1000);
      });
      const ssize_t sent = ::send(fd, bytes, count, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        // The rank is gone (it failed or the job is ending): its own exit explains the job's end.
        throw FeedStopped{};
      }
      bytes += sent;
      count -= static_cast<size_t>(sent);
    }
  };
  write_all(reinterpret_cast<const uint8_t*>(&header), sizeof(header));
  write_all(data, size);
}

void PipeDealer::send_error_to_all(const std::string& message, uint32_t kind) {
  for (size_t local = 0; local < sockets_.size(); ++local) {
    if (sockets_[local] < 0) continue;
    try {
      send(static_cast<int>(local), kind, 0, 0, reinterpret_cast<const uint8_t*>(message.data()), message.size());
    } catch (...) {
      // That rank is gone or stuck; the others still get the reason.
    }
  }
}

PipeFeed::PipeFeed(const std::string& rendezvous_name, int local_rank, std::string channel,
                   std::chrono::milliseconds timeout)
    : channel_(std::move(channel)), timeout_(timeout) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw DataError(fmt::format("Pipe mode: cannot create a local socket: {}", std::strerror(errno)));
  socklen_t length = 0;
  const sockaddr_un address = abstract_address(rendezvous_name, length);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    const int error = errno;
    ::close(fd_);
    throw DataError(fmt::format("Pipe mode: cannot reach the host's reader of channel {}: {}", channel_, std::strerror(error)));
  }
  const int32_t rank = local_rank;
  if (::send(fd_, &rank, sizeof(rank), MSG_NOSIGNAL) != sizeof(rank)) {
    const int error = errno;
    ::close(fd_);
    throw DataError(fmt::format("Pipe mode: cannot register with the host's reader of channel {}: {}", channel_,
                                std::strerror(error)));
  }
}

PipeFeed::~PipeFeed() {
  if (fd_ >= 0) ::close(fd_);
}

void PipeFeed::receive(void* data, size_t size) {
  auto* bytes = static_cast<uint8_t*>(data);
  // Longer than the reader's own waits, so that its more precise reason (sent as an error frame) comes first.
  const auto deadline = clock::now() + timeout_ + std::chrono::seconds(30);
  while (size > 0) {
    wait_for(fd_, POLLIN, stop_, deadline, [&] {
      return fmt::format("{}: no record from the host's reader for {} s", describe(), timeout_.count() / 1000 + 30);
    });
    const ssize_t got = ::recv(fd_, bytes, size, MSG_DONTWAIT);
    if (got > 0) {
      bytes += got;
      size -= static_cast<size_t>(got);
    } else if (got == 0) {
      throw DataError(fmt::format("{}: the host's reader (in its first rank) went away; that rank's own error "
                                  "says why",
                                  describe()));
    } else if (errno != EAGAIN && errno != EINTR) {
      throw DataError(fmt::format("{}: receiving from the host's reader failed: {}", describe(), std::strerror(errno)));
    }
  }
}

int64_t PipeFeed::corrupt_in_epoch(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(corrupt_mutex_);
  auto found = corrupt_by_epoch_.find(epoch);
  return found == corrupt_by_epoch_.end() ? 0 : found->second;
}

bool PipeFeed::next(int64_t epoch, FedRecord& record) {
  FrameHeader header{};
  receive(&header, sizeof(header));
  constexpr uint64_t kMaxFrame = uint64_t{1} << 30;
  if (header.size > kMaxFrame) throw DataError(fmt::format("{}: a frame of {} bytes from the reader", describe(), header.size));
  switch (header.kind) {
    case kRecord:
    case kRepeat:
      record.index = header.index;
      record.label = header.label;
      record.repeat = header.kind == kRepeat;
      record.image.resize(header.size);
      receive(record.image.data(), header.size);
      return true;
    case kEndOfShare: {
      int64_t corrupt = 0;
      if (header.size != sizeof(corrupt)) throw DataError(fmt::format("{}: a malformed end frame", describe()));
      receive(&corrupt, sizeof(corrupt));
      if (header.index != epoch) {
        throw DataError(fmt::format("{}: the reader ended epoch {} while this rank reads epoch {}", describe(),
                                    header.index, epoch));
      }
      {
        std::lock_guard<std::mutex> lock(corrupt_mutex_);
        corrupt_by_epoch_[epoch] = corrupt;
      }
      return false;
    }
    case kError:
    case kTimeout: {
      std::string message(header.size, '\0');
      receive(message.data(), header.size);
      if (header.kind == kTimeout) throw DataTimeout(message);
      throw DataError(message);
    }
    default:
      throw DataError(fmt::format("{}: an unknown frame kind {} from the reader", describe(), header.kind));
  }
}

}  // namespace train::data
