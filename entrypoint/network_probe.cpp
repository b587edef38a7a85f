#include "entrypoint/network_probe.h"

#include "common/log.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace train {

std::optional<std::string> resolve_ipv4(const std::string& host, std::string* why_not) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int code = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (code != 0 || found == nullptr) {
    if (why_not) *why_not = code == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(code);
    return std::nullopt;
  }
  char text[INET_ADDRSTRLEN] = {};
  auto* address = reinterpret_cast<sockaddr_in*>(found->ai_addr);
  ::inet_ntop(AF_INET, &address->sin_addr, text, sizeof text);
  ::freeaddrinfo(found);
  return std::string(text);
}

namespace {

// Milliseconds left until `deadline`, at least 0.
int millis_left(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<long long>(0, left.count()));
}

// Waits for `events` on `fd` until `deadline`: 1 when they came, 0 on time-out, -1 on an error (errno) or
// when `cancel_fd` became readable (errno ECANCELED).
int wait_for(int fd, short events, std::chrono::steady_clock::time_point deadline, int cancel_fd) {
  while (true) {
    pollfd waiting[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    int ready = ::poll(waiting, cancel_fd >= 0 ? 2 : 1, millis_left(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0 && cancel_fd >= 0 && waiting[1].revents != 0) {
      errno = ECANCELED;
      return -1;
    }
    return ready < 0 ? -1 : ready > 0 ? 1 : 0;
  }
}

}  // namespace

int connect_tcp(const std::string& address, int port, std::chrono::milliseconds timeout, std::string* why_not,
                int cancel_fd) {
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, address.c_str(), &target.sin_addr) != 1) {
    if (why_not) *why_not = fmt::format("\"{}\" is not an IPv4 address", address);
    return -1;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (why_not) *why_not = std::strerror(errno);
    return -1;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target) != 0) {
    if (errno != EINPROGRESS) {
      if (why_not) *why_not = std::strerror(errno);
      ::close(fd);
      return -1;
    }
    int ready = wait_for(fd, POLLOUT, deadline, cancel_fd);
    int error = 0;
    socklen_t size = sizeof error;
    if (ready == 0) {
      if (why_not) *why_not = fmt::format("no answer within {} ms", timeout.count());
      ::close(fd);
      return -1;
    }
    if (ready < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0) {
      if (why_not) *why_not = std::strerror(ready < 0 ? errno : error);
      ::close(fd);
      return -1;
    }
  }
  return fd;
}

bool ssh_answers(const std::string& address, int port, std::chrono::milliseconds timeout, std::string* why_not,
                 int cancel_fd) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int fd = connect_tcp(address, port, timeout, why_not, cancel_fd);
  if (fd < 0) return false;
  // An SSH server speaks first: "SSH-2.0-...\r\n". Reading that line tells sshd from anything else
  // listening there (and from a port that accepts and then closes, as a dying sshd may).
  auto read_some = [&](char* buffer, size_t size) -> ssize_t {
    while (true) {
      if (wait_for(fd, POLLIN, deadline, cancel_fd) <= 0) return -1;
      ssize_t count = ::read(fd, buffer, size);
      if (count < 0 && errno == EINTR) continue;
      return count;
    }
  };
  std::string greeting;
  char c = 0;
  while (greeting.size() < 255 && read_some(&c, 1) == 1 && c != '\n') greeting.push_back(c);
  const bool is_ssh = greeting.rfind("SSH-", 0) == 0;
  if (is_ssh) {
    // Leave as a polite client would: our own identification, then end of stream, then read what the
    // server still sends until it closes. Dropping the connection with its data unread would make sshd
    // log a reset for every probe.
    write_fully(fd, "SSH-2.0-train_probe\r\n");
    ::shutdown(fd, SHUT_WR);
    char drain[4096];
    while (read_some(drain, sizeof drain) > 0) {
    }
  }
  ::close(fd);
  if (is_ssh) return true;
  if (why_not) {
    *why_not = greeting.empty() ? "connected, but no SSH greeting came" : "connected, but what answered is not an SSH server";
  }
  return false;
}

std::vector<std::string> interface_names() {
  std::vector<std::string> names;
  if (struct if_nameindex* list = ::if_nameindex()) {
    for (auto* entry = list; entry->if_index != 0; ++entry) names.emplace_back(entry->if_name);
    ::if_freenameindex(list);
  }
  return names;
}

std::optional<std::string> interface_ipv4(const std::string& name) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (auto* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET || name != entry->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr, text, sizeof text);
    found = text;
    break;
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace train
