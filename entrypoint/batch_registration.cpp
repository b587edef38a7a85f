#include "entrypoint/batch_registration.h"

#include "common/log.h"
#include "entrypoint/network_probe.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace train {
namespace {

using clock = std::chrono::steady_clock;

// A registration is one short line each way; a peer that takes longer than this is not a healthy child.
constexpr auto exchange_limit = std::chrono::seconds(5);
constexpr size_t longest_line = 4096;
constexpr auto progress_every = std::chrono::seconds(10);

// One line (without its newline) within `limit`, or nullopt.
std::optional<std::string> read_line(int fd, std::chrono::milliseconds limit) {
  const auto deadline = clock::now() + limit;
  std::string line;
  while (line.size() < longest_line) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd waiting{fd, POLLIN, 0};
    int ready = ::poll(&waiting, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char c = 0;
    ssize_t got = ::read(fd, &c, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return std::nullopt;
    if (c == '\n') return line;
    line.push_back(c);
  }
  return std::nullopt;
}

void send_line(int fd, const nlohmann::json& message) { write_fully(fd, message.dump() + "\n"); }

std::string address_text(const sockaddr_in& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
  return text;
}

std::string peer_address(int fd) {
  sockaddr_in address{};
  socklen_t size = sizeof address;
  return ::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0 ? address_text(address) : "?";
}

std::string local_address(int fd) {
  sockaddr_in address{};
  socklen_t size = sizeof address;
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0 ? address_text(address) : "";
}

// The registration a child sent, or a reason it is not one.
std::optional<NodeRegistration> parse_registration(const std::string& line, std::string& why_not) {
  auto message = nlohmann::json::parse(line, nullptr, false);
  if (message.is_discarded() || !message.is_object() || !message.contains("node_index") ||
      !message["node_index"].is_number_integer() || !message.contains("slots") || !message["slots"].is_number_integer()) {
    why_not = "expected a JSON object with integer node_index and slots";
    return std::nullopt;
  }
  NodeRegistration registration;
  registration.node_index = message["node_index"].get<int>();
  registration.slots = message["slots"].get<int>();
  return registration;
}

}  // namespace

RegistrationServer::RegistrationServer(int port) : port_(port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw RegistrationError(fmt::format("cannot create a socket: {}", std::strerror(errno)));
  int yes = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(listen_fd_, 64) != 0) {
    std::string reason = std::strerror(errno);
    ::close(listen_fd_);
    throw RegistrationError(fmt::format(
        "the main node cannot listen for registrations on TCP port {}: {}; set TRAIN_REGISTRATION_PORT (on every "
        "node) to a free port",
        port, reason));
  }
}

RegistrationServer::~RegistrationServer() {
  stopping_ = true;
  if (refuser_.joinable()) refuser_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::map<int, NodeRegistration> RegistrationServer::collect(const BatchNodeInfo& node, int slots,
                                                            std::chrono::seconds timeout, JobWaiter& waiter) {
  std::map<int, NodeRegistration> children;
  const int expected = node.num_nodes - 1;
  const auto start = clock::now();
  auto next_progress = start + progress_every;
  log_info("main node: waiting up to {} s for {} child node(s) to register on TCP port {}", timeout.count(), expected,
           port_);
  while (static_cast<int>(children.size()) < expected) {
    const auto now = clock::now();
    if (now - start > timeout) {
      std::vector<int> missing;
      for (int index = 0; index < node.num_nodes; ++index) {
        if (index != node.main_node_index && !children.count(index)) missing.push_back(index);
      }
      throw RegistrationError(fmt::format(
          "{} of {} child node(s) did not register within {} s (missing node index {}); check that they started and "
          "can reach this node on TCP port {}, or raise TRAIN_REGISTRATION_TIMEOUT_SECONDS",
          missing.size(), expected, timeout.count(), fmt::join(missing, ", "), port_));
    }
    if (now >= next_progress) {
      log_info("main node: {} of {} child node(s) registered after {} s", children.size(), expected,
               std::chrono::duration_cast<std::chrono::seconds>(now - start).count());
      next_progress = now + progress_every;
    }
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        throw RegistrationError(fmt::format("accepting registrations failed: {}", std::strerror(errno)));
      }
      // Wake for the next connection or signal, whichever comes first.
      pollfd waiting[2] = {{listen_fd_, POLLIN, 0}, {waiter.inbox().fd(), POLLIN, 0}};
      ::poll(waiting, 2, 500);
      if (!waiter.pause(std::chrono::milliseconds(0))) return {};
      continue;
    }
    std::string why_not;
    auto line = read_line(fd, exchange_limit);
    auto registration = line ? parse_registration(*line, why_not) : std::nullopt;
    if (!line) why_not = "no registration line arrived";
    const std::string from = peer_address(fd);
    if (registration) {
      registration->address = from;
      if (registration->node_index < 0 || registration->node_index >= node.num_nodes ||
          registration->node_index == node.main_node_index) {
        why_not = fmt::format("node index {} is not a child of this {}-node job (main node index {})",
                              registration->node_index, node.num_nodes, node.main_node_index);
        registration.reset();
      }
    }
    if (!registration) {
      log_info("main node: refused a registration from {}: {}", from, why_not);
      send_line(fd, {{"accepted", false}, {"reason", why_not}});
      ::close(fd);
      continue;
    }
    if (registration->slots != slots) {
      std::string reason = fmt::format(
          "node {} runs {} rank(s) but the main node runs {}; every node of the job must run the same number "
          "(use one instance type, or set processes_per_host)",
          registration->node_index, registration->slots, slots);
      send_line(fd, {{"accepted", false}, {"reason", reason}});
      ::close(fd);
      throw RegistrationError(reason);
    }
    if (own_address_.empty()) own_address_ = local_address(fd);
    auto [entry, added] = children.insert_or_assign(registration->node_index, *registration);
    if (added) {
      log_info("main node: node {} registered from {} with {} slot(s) ({} of {})", registration->node_index, from,
               registration->slots, children.size(), expected);
    } else {
      log_info("main node: node {} registered again, now from {}; the later registration counts",
               registration->node_index, from);
    }
    send_line(fd, {{"accepted", true}});
    ::close(fd);
  }
  return children;
}

void RegistrationServer::refuse_from_now_on(std::string reason) {
  refuser_ = std::thread([this, reason = std::move(reason)] {
    while (!stopping_) {
      pollfd waiting{listen_fd_, POLLIN, 0};
      if (::poll(&waiting, 1, 200) <= 0) continue;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      (void)read_line(fd, std::chrono::milliseconds(1000));
      send_line(fd, {{"accepted", false}, {"reason", reason}});
      ::close(fd);
    }
  });
}

std::string register_with_main_node(const BatchNodeInfo& node, int slots, int port, std::chrono::seconds timeout,
                                    JobWaiter& waiter) {
  const auto start = clock::now();
  auto next_progress = start;
  std::string why_not;
  while (clock::now() - start <= timeout) {
    if (clock::now() >= next_progress) {
      log_info("registering with the main node {}:{} (node {}, {} slot(s)){}", node.main_node_address, port,
               node.node_index, slots, why_not.empty() ? "" : fmt::format("; last attempt: {}", why_not));
      next_progress = clock::now() + progress_every;
    }
    int fd = connect_tcp(node.main_node_address, port, std::chrono::seconds(3), &why_not);
    if (fd >= 0) {
      std::string own_address = local_address(fd);
      send_line(fd, {{"node_index", node.node_index}, {"address", own_address}, {"slots", slots}});
      auto answer_line = read_line(fd, exchange_limit);
      ::close(fd);
      auto answer = answer_line ? nlohmann::json::parse(*answer_line, nullptr, false) : nlohmann::json();
      if (answer.is_object() && answer.value("accepted", false)) {
        log_info("registered with the main node {} as node {} ({})", node.main_node_address, node.node_index,
                 own_address);
        return own_address;
      }
      if (answer.is_object() && answer.contains("reason") && answer["reason"].is_string()) {
        throw RegistrationError(fmt::format("the main node {} refused this node's registration: {}",
                                            node.main_node_address, answer["reason"].get<std::string>()));
      }
      why_not = "the main node did not answer the registration";
    }
    if (!waiter.pause(std::chrono::seconds(1))) return "";
  }
  throw RegistrationError(fmt::format(
      "could not register with the main node {}:{} within {} s (last attempt: {}); the main node may have failed "
      "or not started, or TCP port {} is blocked between the nodes (TRAIN_REGISTRATION_PORT,"
      " TRAIN_REGISTRATION_TIMEOUT_SECONDS)",
      node.main_node_address, port, timeout.count(), why_not, port));
}

}  // namespace train
