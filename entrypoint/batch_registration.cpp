#include "entrypoint/batch_registration.h"

#include "common/log.h"
#include "common/monotonic_clock.h"
#include "entrypoint/network_probe.h"
#include "job/hyperparameter_schema.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
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

// What a connection to the main node sent and what became of it.
struct Verdict {
  bool accepted = false;
  std::string reason;  // why it was refused
};

// Judges one registration line from `from` against the job, and records an accepted child in `children`.
// The job's ID is checked first, so a sender who does not know it learns nothing about the job.
Verdict judge_registration(const std::string& line, const std::string& from, const BatchNodeInfo& node, int slots,
                           std::map<int, NodeRegistration>& children) {
  auto message = nlohmann::json::parse(line, nullptr, false);
  auto integer = [&](const char* key) {
    return message.is_object() && message.contains(key) && message[key].is_number_integer();
  };
  if (!message.is_object() || !message.contains("job_id") || !message["job_id"].is_string() ||
      !integer("node_index") || !integer("slots")) {
    return {false, "expected one JSON line with the job's job_id (a string), node_index and slots (integers)"};
  }
  if (message["job_id"].get<std::string>() != node.job_id) {
    return {false, "it does not name this job (its job_id is not this job's AWS_BATCH_JOB_ID)"};
  }
  const auto index = message["node_index"].get<long long>();
  const auto count = message["slots"].get<long long>();
  if (index < 0 || index >= node.num_nodes || index == node.main_node_index) {
    return {false, fmt::format("node index {} is not a child of this {}-node job (main node index {})", index,
                               node.num_nodes, node.main_node_index)};
  }
  const int child = static_cast<int>(index);
  if (auto taken = children.find(child); taken != children.end() && taken->second.address != from) {
    return {false, fmt::format("node index {} is already registered from {}", child, taken->second.address)};
  }
  if (count < 1 || count > max_processes_per_host) {
    return {false, fmt::format("node {} registers {} slot(s); a node runs 1 to {} rank(s)", child, count,
                               max_processes_per_host)};
  }
  if (count != slots) {
    return {false, fmt::format("node {} runs {} rank(s) but the main node runs {}; every node of the job must run "
                               "the same number (use one instance type, or set processes_per_host)",
                               child, count, slots)};
  }
  auto [entry, added] = children.insert_or_assign(child, NodeRegistration{child, from, static_cast<int>(count)});
  if (added) {
    log_info("main node: node {} registered from {} with {} slot(s) ({} of {})", child, from, count, children.size(),
             node.num_nodes - 1);
  } else {
    log_info("main node: node {} registered again from {}", child, from);  // its answer was lost: it retried
  }
  return {true, ""};
}

// A connection whose registration line is still arriving; each gets `exchange_limit` to send it, and the
// main node serves them all at once, so a peer that connects and stays silent delays no one.
struct PendingConnection {
  int fd = -1;
  std::string from;
  std::string received;
  clock::time_point deadline;
};

// The most connections served at once; more wait in the listen queue.
constexpr size_t most_pending = 64;
// The refusals remembered for the time-out's message.
constexpr size_t refusals_kept = 5;

}  // namespace

RegistrationServer::RegistrationServer(const std::string& address, int port) : address_(address), port_(port) {
  sockaddr_in bound{};
  bound.sin_family = AF_INET;
  bound.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, address.c_str(), &bound.sin_addr) != 1) {
    throw RegistrationError(fmt::format("the main node's address \"{}\" is not an IPv4 address", address));
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw RegistrationError(fmt::format("cannot create a socket: {}", std::strerror(errno)));
  int yes = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&bound), sizeof bound) != 0 || ::listen(listen_fd_, 64) != 0) {
    std::string reason = std::strerror(errno);
    ::close(listen_fd_);
    throw RegistrationError(fmt::format(
        "the main node cannot listen for registrations on {}:{}: {}; set TRAIN_REGISTRATION_PORT (on every node) "
        "to a free port",
        address, port, reason));
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
  std::vector<PendingConnection> pending;
  std::vector<std::string> refusals;  // the last few, "ADDRESS: reason"
  // Every connection still open is closed however this ends.
  struct ClosePending {
    std::vector<PendingConnection>& pending;
    ~ClosePending() {
      for (auto& connection : pending) ::close(connection.fd);
    }
  } close_pending{pending};
  auto answer = [&](PendingConnection& connection, const Verdict& verdict) {
    if (verdict.accepted) {
      send_line(connection.fd, {{"accepted", true}});
    } else {
      log_info("main node: refused a registration from {}: {}", connection.from, verdict.reason);
      send_line(connection.fd, {{"accepted", false}, {"reason", verdict.reason}});
      refusals.push_back(fmt::format("{}: {}", connection.from, verdict.reason));
      if (refusals.size() > refusals_kept) refusals.erase(refusals.begin());
    }
    ::close(connection.fd);
    connection.fd = -1;
  };

  const int expected = node.num_nodes - 1;
  const auto start = clock::now();
  auto next_progress = start + progress_every;
  log_info("main node: waiting up to {} s for {} child node(s) of job {} to register on {}:{}", timeout.count(),
           expected, node.job_id, address_, port_);
  while (static_cast<int>(children.size()) < expected) {
    const auto now = clock::now();
    if (now - start > timeout) {
      std::vector<int> missing;
      for (int index = 0; index < node.num_nodes; ++index) {
        if (index != node.main_node_index && !children.count(index)) missing.push_back(index);
      }
      throw RegistrationError(fmt::format(
          "{} of {} child node(s) did not register within {} s (missing node index {}); check that they started and "
          "can reach this node on {}:{}, or raise TRAIN_REGISTRATION_TIMEOUT_SECONDS{}",
          missing.size(), expected, timeout.count(), fmt::join(missing, ", "), address_, port_,
          refusals.empty() ? std::string()
                           : fmt::format(". The last registrations refused: {}", fmt::join(refusals, "; "))));
    }
    if (now >= next_progress) {
      log_info("main node: {} of {} child node(s) registered after {} s", children.size(), expected,
               seconds_since(start));
      next_progress = now + progress_every;
    }
    // Wake for a new connection, a line, a signal or the next deadline, whichever comes first.
    std::vector<pollfd> waiting = {{listen_fd_, POLLIN, 0}, {waiter.inbox().fd(), POLLIN, 0}};
    for (const auto& connection : pending) waiting.push_back({connection.fd, POLLIN, 0});
    ::poll(waiting.data(), waiting.size(), 200);
    if (!waiter.pause(std::chrono::milliseconds(0))) return {};

    for (size_t i = 0; i < pending.size(); ++i) {
      auto& connection = pending[i];
      if (waiting[2 + i].revents != 0) {
        char buffer[512];
        ssize_t got = ::read(connection.fd, buffer, sizeof buffer);
        if (got > 0) connection.received.append(buffer, static_cast<size_t>(got));
        if (auto end = connection.received.find('\n'); end != std::string::npos) {
          answer(connection, judge_registration(connection.received.substr(0, end), connection.from, node, slots,
                                                children));
        } else if (connection.received.size() > longest_line) {
          answer(connection, {false, fmt::format("no registration line within its first {} bytes", longest_line)});
        } else if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
          answer(connection, {false, "the connection closed before a registration line arrived"});
        }
      }
      if (connection.fd >= 0 && clock::now() > connection.deadline) {
        answer(connection, {false, fmt::format("no registration line arrived within {} s", exchange_limit.count())});
      }
    }
    std::erase_if(pending, [](const PendingConnection& connection) { return connection.fd < 0; });

    while (pending.size() < most_pending) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) break;
        throw RegistrationError(fmt::format("accepting registrations failed: {}", std::strerror(errno)));
      }
      pending.push_back({fd, peer_address(fd), "", clock::now() + exchange_limit});
    }
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
      log_info("main node: refused a registration from {}: training has started", peer_address(fd));
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
  // The main node opens its registration port about when this node starts: asked again after 50 ms at
  // first, doubling up to once a second (a main node that is slow to come).
  auto retry_pause = std::chrono::milliseconds(50);
  while (clock::now() - start <= timeout) {
    if (clock::now() >= next_progress) {
      log_info("registering with the main node {}:{} (node {}, {} slot(s)){}", node.main_node_address, port,
               node.node_index, slots, why_not.empty() ? "" : fmt::format("; last attempt: {}", why_not));
      next_progress = clock::now() + progress_every;
    }
    int fd = connect_tcp(node.main_node_address, port, std::chrono::seconds(3), &why_not);
    if (fd >= 0) {
      std::string own_address = local_address(fd);
      send_line(fd, {{"job_id", node.job_id}, {"node_index", node.node_index}, {"slots", slots}});
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
    if (!waiter.pause(retry_pause)) return "";
    retry_pause = std::min(2 * retry_pause, std::chrono::milliseconds(1000));
  }
  throw RegistrationError(fmt::format(
      "could not register with the main node {}:{} within {} s (last attempt: {}); the main node may have failed "
      "or not started, or TCP port {} is blocked between the nodes (TRAIN_REGISTRATION_PORT,"
      " TRAIN_REGISTRATION_TIMEOUT_SECONDS)",
      node.main_node_address, port, timeout.count(), why_not, port));
}

}  // namespace train
