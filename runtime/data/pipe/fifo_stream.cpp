#include "runtime/data/pipe/fifo_stream.h"

#include "runtime/data/data_error.h"
#include "runtime/data/pipe/record_feed.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace train::data {

namespace {

using clock = std::chrono::steady_clock;
constexpr auto kSlice = std::chrono::milliseconds(100);

}  // namespace

void FifoStream::check_stop() const {
  if (stop_ != nullptr && stop_->load()) throw FeedStopped{};
}

FifoStream::FifoStream(const std::string& path, std::chrono::milliseconds timeout, const std::atomic<bool>* stop)
    : ByteStream(path), timeout_(timeout), stop_(stop), buffer_(size_t{1} << 20) {
  const auto deadline = clock::now() + timeout_;
  struct stat status{};
  while (::stat(path.c_str(), &status) != 0) {
    if (errno != ENOENT) throw DataError(fmt::format("{}: cannot use the Pipe-mode FIFO: {}", path, std::strerror(errno)));
    check_stop();
    if (clock::now() > deadline) {
      throw DataTimeout(fmt::format("the Pipe-mode FIFO {} did not appear within {} s; SageMaker creates it when the "
                                  "channel's data starts to stream: check the channel's S3 location, or set "
                                  "TRAIN_DATA_TIMEOUT_SECONDS to wait longer",
                                  path, timeout_.count() / 1000));
    }
    std::this_thread::sleep_for(kSlice);
  }
  // Non-blocking, so that opening does not wait for a writer without bound; poll() then waits for one.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw DataError(fmt::format("{}: cannot open the Pipe-mode FIFO: {}", path, std::strerror(errno)));
}

FifoStream::~FifoStream() {
  if (fd_ >= 0) ::close(fd_);
}

bool FifoStream::refill() {
  const auto deadline = clock::now() + timeout_;
  for (;;) {
    check_stop();
    pollfd descriptor{fd_, POLLIN, 0};
    const int ready = ::poll(&descriptor, 1, static_cast<int>(kSlice.count()));
    if (ready < 0 && errno != EINTR) {
      throw DataError(fmt::format("{}: waiting for data failed: {}", name(), std::strerror(errno)));
    }
    if (ready > 0) {
      // POLLHUP without POLLIN: the writer closed; read() then returns 0, the end of the stream.
      const ssize_t got = ::read(fd_, buffer_.data(), buffer_.size());
      if (got > 0) {
        begin_ = 0;
        end_ = static_cast<size_t>(got);
        return true;
      }
      if (got == 0) return false;
      if (errno != EAGAIN && errno != EINTR) {
        throw DataError(fmt::format("{}: reading failed at byte {}: {}", name(), offset(), std::strerror(errno)));
      }
    }
    if (clock::now() > deadline) {
      throw DataTimeout(fmt::format("{}: no data for {} s at byte {} of the stream; SageMaker stopped streaming the "
                                  "channel (or set TRAIN_DATA_TIMEOUT_SECONDS to wait longer)",
                                  name(), timeout_.count() / 1000, offset()));
    }
  }
}

size_t FifoStream::read(uint8_t* out, size_t size) {
  size_t got = 0;
  while (got < size && !ended_) {
    if (begin_ == end_ && !refill()) {
      ended_ = true;
      break;
    }
    const size_t take = std::min(size - got, end_ - begin_);
    std::memcpy(out + got, buffer_.data() + begin_, take);
    begin_ += take;
    got += take;
  }
  offset_ += got;
  return got;
}

}  // namespace train::data
