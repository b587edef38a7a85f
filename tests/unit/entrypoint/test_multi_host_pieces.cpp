// The pieces of a multi-host launch that can be checked inside one process: the host file, the timeout
// variables, the SSH probe, finding Open MPI daemons by namespace, and AWS Batch registration over real TCP
// on the loopback interface. tests/cluster runs the whole thing across simulated hosts.
#include "common/config_error.h"
#include "entrypoint/batch_registration.h"
#include "entrypoint/job_waiter.h"
#include "entrypoint/mpirun_command.h"
#include "entrypoint/multi_host_settings.h"
#include "entrypoint/network_probe.h"
#include "entrypoint/peer_probe.h"
#include "entrypoint/ranks_on_host.h"
#include "entrypoint/signal_inbox.h"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <csignal>
#include <filesystem>
#include <future>
#include <map>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace train;

namespace {

// A one-connection TCP server on 127.0.0.1 that greets with `greeting`; returns its port.
// A socket listening on 127.0.0.1 at a free port, which goes to `port`.
int listen_on_loopback(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(fd, 4) == 0);
  socklen_t size = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  port = ntohs(address.sin_port);
  return fd;
}

class GreetingServer {
 public:
  explicit GreetingServer(std::string greeting) {
    fd_ = listen_on_loopback(port_);
    thread_ = std::thread([this, greeting = std::move(greeting)] {
      int client = ::accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      if (!greeting.empty()) (void)!::write(client, greeting.data(), greeting.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::close(client);
    });
  }
  ~GreetingServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// A port on 127.0.0.1 that nothing listens on (bound, then released).
int unused_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t size = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

BatchNodeInfo batch_node(int index, int num_nodes) {
  BatchNodeInfo node;
  node.node_index = index;
  node.main_node_index = 0;
  node.num_nodes = num_nodes;
  if (index != 0) node.main_node_address = "127.0.0.1";
  return node;
}

}  // namespace

TEST_CASE("the host file has one line per host in rank order with one slot per rank", "[multi_host]") {
  CHECK(hostfile_text({"algo-1", "algo-2", "algo-10"}, 4) ==
        "algo-1 slots=4 max_slots=4\nalgo-2 slots=4 max_slots=4\nalgo-10 slots=4 max_slots=4\n");
}

TEST_CASE("a host file replaces the host list on mpirun's command line", "[multi_host]") {
  JobDescription job;
  job.cluster.hosts = {"algo-1", "algo-2"};
  job.cluster.current_host = job.cluster.master_host = "algo-1";
  job.ranks_per_host = 2;
  job.hyperparameters = parse_hyperparameters(nlohmann::json::object(), "hyperparameters.json");
  auto command = build_mpirun_command(job, {"train", "rank"}, {}, "mpirun", "/tmp/hosts");
  auto at = std::find(command.begin(), command.end(), "--hostfile");
  REQUIRE(at != command.end());
  CHECK(*(at + 1) == "/tmp/hosts");
  CHECK(std::find(command.begin(), command.end(), "--host") == command.end());
}

TEST_CASE("multi-host timeouts have defaults and can be overridden", "[multi_host]") {
  auto defaults = multi_host_settings_from_environment({});
  CHECK(defaults.peers_timeout == std::chrono::seconds(600));
  CHECK(defaults.master_lost_timeout == std::chrono::seconds(30));
  CHECK(defaults.registration_port == 7627);
  auto changed = multi_host_settings_from_environment(
      {{"TRAIN_PEERS_TIMEOUT_SECONDS", "12"}, {"TRAIN_MASTER_LOST_SECONDS", "3"}, {"TRAIN_REGISTRATION_PORT", "9000"},
       {"TRAIN_RESOLVE_TIMEOUT_SECONDS", "7"}, {"TRAIN_RANKS_TIMEOUT_SECONDS", "40"}, {"TRAIN_SSHD", "none"}});
  CHECK(changed.peers_timeout == std::chrono::seconds(12));
  CHECK(changed.master_lost_timeout == std::chrono::seconds(3));
  CHECK(changed.registration_port == 9000);
  CHECK(changed.resolve_timeout == std::chrono::seconds(7));
  CHECK(changed.ranks_timeout == std::chrono::seconds(40));
  CHECK(changed.sshd == "none");
}

TEST_CASE("a malformed multi-host timeout names the variable and what was expected", "[multi_host]") {
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"TRAIN_PEERS_TIMEOUT_SECONDS", "ten"},
           {"TRAIN_MASTER_LOST_SECONDS", "-1"},
           {"TRAIN_REGISTRATION_PORT", "70000"},
           {"TRAIN_REGISTRATION_PORT", "0"}}) {
    try {
      multi_host_settings_from_environment({{name, value}});
      FAIL("accepted " << name << "=" << value);
    } catch (const ConfigError& error) {
      std::string message = error.what();
      CHECK(message.find(name) != std::string::npos);
      CHECK(message.find("expected a whole number") != std::string::npos);
      CHECK(message.find("\"" + value + "\"") != std::string::npos);
    }
  }
}

TEST_CASE("the SSH probe tells an sshd from other servers and from nothing", "[multi_host]") {
  std::string why_not;
  {
    GreetingServer sshd("SSH-2.0-OpenSSH_9.2\r\n");
    CHECK(ssh_answers("127.0.0.1", sshd.port(), std::chrono::seconds(2), &why_not));
  }
  {
    GreetingServer web("HTTP/1.1 400 Bad Request\r\n");
    CHECK_FALSE(ssh_answers("127.0.0.1", web.port(), std::chrono::seconds(2), &why_not));
    CHECK(why_not.find("not an SSH server") != std::string::npos);
  }
  CHECK_FALSE(ssh_answers("127.0.0.1", unused_port(), std::chrono::seconds(2), &why_not));
  CHECK(why_not.find("refused") != std::string::npos);
}

TEST_CASE("the master probes its peers all at once, and a stop cancels the probes still running", "[multi_host]") {
  GreetingServer sshd("SSH-2.0-OpenSSH_9.2\r\n");
  GreetingServer mute("");  // accepts, says nothing
  const int refused = unused_port();
  // A listener that never accepts: the connection completes (the kernel's backlog) and no greeting comes.
  int silent_port = 0;
  const int silent = listen_on_loopback(silent_port);

  auto results = probe_ssh_in_parallel({"127.0.0.1"}, sshd.port(), std::chrono::seconds(5), [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return true;
  });
  REQUIRE(results.size() == 1);
  CHECK(results[0].answered);
  results = probe_ssh_in_parallel({"127.0.0.1"}, mute.port(), std::chrono::seconds(5), [] { return true; });
  CHECK_FALSE(results[0].answered);
  CHECK_FALSE(results[0].cut_short);
  CHECK(results[0].why_not == "connected, but no SSH greeting came");
  results = probe_ssh_in_parallel({"127.0.0.1"}, refused, std::chrono::seconds(5), [] { return true; });
  CHECK(results[0].why_not.find("refused") != std::string::npos);

  // A stop while a probe waits out an hour-long bound: it is cancelled at once (were it not, this would
  // wait that hour).
  int asked = 0;
  results = probe_ssh_in_parallel({"127.0.0.1", "127.0.0.1"}, silent_port, std::chrono::hours(1), [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return ++asked < 3;
  });
  CHECK(asked == 3);
  for (const auto& result : results) {
    CHECK_FALSE(result.answered);
    CHECK(result.cut_short);
  }
  ::close(silent);
}

TEST_CASE("host names resolve to IPv4 addresses, and a bad name says why", "[multi_host]") {
  CHECK(resolve_ipv4("127.0.0.1") == std::optional<std::string>("127.0.0.1"));
  CHECK(resolve_ipv4("localhost").has_value());
  std::string why_not;
  CHECK_FALSE(resolve_ipv4("no-such-host.invalid", &why_not).has_value());
  CHECK_FALSE(why_not.empty());
}

TEST_CASE("the loopback interface is found with its address", "[multi_host]") {
  auto names = interface_names();
  CHECK(std::find(names.begin(), names.end(), "lo") != names.end());
  CHECK(interface_ipv4("lo") == std::optional<std::string>("127.0.0.1"));
  CHECK_FALSE(interface_ipv4("no-such-if0").has_value());
}

TEST_CASE("Open MPI daemons are found on this host only", "[multi_host]") {
  // A process named orted in our namespaces counts; one in another network namespace (another simulated
  // host) does not.
  auto directory = std::filesystem::temp_directory_path() / ("orted-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  auto daemon = directory / "orted";
  std::filesystem::copy_file("/bin/sleep", daemon, std::filesystem::copy_options::overwrite_existing);
  auto start = [&](bool other_namespace) {
    pid_t pid = ::fork();
    if (pid == 0) {
      if (other_namespace) ::execl("/usr/bin/unshare", "unshare", "--net", daemon.c_str(), "30", nullptr);
      else ::execl(daemon.c_str(), "orted", "30", nullptr);
      ::_exit(127);
    }
    return pid;
  };
  pid_t here = start(false);
  pid_t elsewhere = start(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto found = mpi_daemons_on_this_host();
  CHECK(std::find(found.begin(), found.end(), here) != found.end());
  CHECK(std::find(found.begin(), found.end(), elsewhere) == found.end());
  ::kill(here, SIGKILL);
  ::kill(elsewhere, SIGKILL);
  ::waitpid(here, nullptr, 0);
  ::waitpid(elsewhere, nullptr, 0);
  std::filesystem::remove_all(directory);
  // unshare execs the daemon in the same process, so `elsewhere` was the daemon itself: make sure the
  // check above looked at a live one.
  REQUIRE(::geteuid() == 0);
}

namespace {

// One registration line sent from `source` (a loopback address: all of 127.0.0.0/8 is this host's) to the
// main node on 127.0.0.1:`port`; returns the answer line, or "" when the connection closed without one.
std::string send_registration(const std::string& source, int port, const std::string& line,
                              std::chrono::seconds answer_limit = std::chrono::seconds(10)) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  timeval limit{static_cast<time_t>(answer_limit.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  if (!line.empty()) REQUIRE(::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  std::string answer;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') answer.push_back(c);
  ::close(fd);
  return answer;
}

BatchNodeInfo batch_job_node(int index, int num_nodes) {
  BatchNodeInfo node = batch_node(index, num_nodes);
  node.job_id = "4f0c2a7e-job";
  return node;
}

std::future<std::string> register_child(int index, int num_nodes, int slots, int port) {
  return std::async(std::launch::async, [=] {
    SignalInbox child_inbox;
    JobWaiter child_waiter(child_inbox);
    return register_with_main_node(batch_job_node(index, num_nodes), slots, port, std::chrono::seconds(10),
                                   child_waiter);
  });
}

const std::string refused_prefix = R"({"accepted":false,"reason":)";

// The main node's side on 127.0.0.1: its registration server on an unused port, and the waiter its waits use.
struct MainNode {
  SignalInbox inbox;
  JobWaiter waiter{inbox};
  const int port = unused_port();
  RegistrationServer server{"127.0.0.1", port};

  // The collection of a `num_nodes`-node job's children, each of `slots` ranks, on its own thread.
  std::future<std::map<int, NodeRegistration>> collect_in_background(int num_nodes, int slots,
                                                                     std::chrono::seconds timeout) {
    return std::async(std::launch::async,
                      [=, this] { return server.collect(batch_job_node(0, num_nodes), slots, timeout, waiter); });
  }
};

}  // namespace

TEST_CASE("AWS Batch children register with the main node under the job's ID, and re-sending is idempotent",
          "[multi_host]") {
  MainNode main;
  const int port = main.port;
  // The main node collects on its own thread; node 1 registers last, so that both of node 2's
  // registrations are answered while the collection still runs (after it, only the refusal below answers).
  auto collected = main.collect_in_background(3, 2, std::chrono::seconds(20));
  CHECK(register_child(2, 3, 2, port).get() == "127.0.0.1");
  // Node 2 again from the same address, as when its answer was lost and it retried: accepted again.
  CHECK(register_child(2, 3, 2, port).get() == "127.0.0.1");
  CHECK(register_child(1, 3, 2, port).get() == "127.0.0.1");
  auto children = collected.get();
  REQUIRE(children.size() == 2);
  CHECK(children.at(1).address == "127.0.0.1");
  CHECK(children.at(2).slots == 2);

  main.server.refuse_from_now_on("training has started");
  CHECK_THROWS_WITH(register_child(1, 3, 2, port).get(), Catch::Contains("training has started"));
}

TEST_CASE("the main node refuses what is not one of the job's nodes, logs it, and keeps waiting for the real ones",
          "[multi_host]") {
  MainNode main;
  const int port = main.port;
  auto collected = main.collect_in_background(3, 2, std::chrono::seconds(30));
  // A connection that never sends anything is held open throughout: the others are served meanwhile.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    REQUIRE(::connect(silent, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  }
  const std::string stranger = "127.0.0.9";
  // Without the job's ID (the issue's two lines: the first failed the job, the second took node 1's place).
  CHECK(send_registration(stranger, port, "{\"node_index\":1,\"slots\":99}\n") ==
        refused_prefix + R"x("expected one JSON line with the job's job_id (a string), node_index and slots (integers)"})x");
  CHECK(send_registration(stranger, port, "{\"node_index\":1,\"slots\":2}\n").starts_with(refused_prefix));
  // Another job's ID; the answer does not say this job's.
  CHECK(send_registration(stranger, port, R"({"job_id":"other-job","node_index":1,"slots":2})" "\n") ==
        refused_prefix + R"x("it does not name this job (its job_id is not this job's AWS_BATCH_JOB_ID)"})x");
  CHECK(send_registration(stranger, port, "not json\n").starts_with(refused_prefix));
  CHECK(send_registration(stranger, port, std::string(4500, 'x')).starts_with(refused_prefix));  // read whole: no reset
  // The job's ID, but nothing a child of this job could send.
  for (auto [line, reason] : std::vector<std::pair<std::string, std::string>>{
           {R"({"job_id":"4f0c2a7e-job","node_index":0,"slots":2})", "node index 0 is not a child of this 3-node job (main node index 0)"},
           {R"({"job_id":"4f0c2a7e-job","node_index":3,"slots":2})", "node index 3 is not a child of this 3-node job (main node index 0)"},
           {R"({"job_id":"4f0c2a7e-job","node_index":-1,"slots":2})", "node index -1 is not a child"},
           {R"({"job_id":"4f0c2a7e-job","node_index":99999999999,"slots":2})", "node index 99999999999 is not a child"},
           {R"({"job_id":"4f0c2a7e-job","node_index":1,"slots":0})", "node 1 registers 0 slot(s); a node runs 1 to 1024 rank(s)"},
           {R"({"job_id":"4f0c2a7e-job","node_index":1,"slots":99999})", "node 1 registers 99999 slot(s); a node runs 1 to 1024 rank(s)"},
           {R"({"job_id":"4f0c2a7e-job","node_index":1,"slots":99})", "node 1 runs 99 rank(s) but the main node runs 2"},
           {R"({"job_id":"4f0c2a7e-job","node_index":1.5,"slots":2})", "expected one JSON line"}}) {
    CAPTURE(line);
    auto answer = send_registration(stranger, port, line + "\n");
    CHECK(answer.starts_with(refused_prefix));
    CHECK_THAT(answer, Catch::Contains(reason));
  }
  // The real node 1 (from 127.0.0.1) and node 2: the job goes on.
  CHECK(register_child(1, 3, 2, port).get() == "127.0.0.1");
  // A node index already registered, from another address, is refused; from node 1's own address it is not.
  CHECK(send_registration(stranger, port, R"({"job_id":"4f0c2a7e-job","node_index":1,"slots":2})" "\n") ==
        refused_prefix + R"x("node index 1 is already registered from 127.0.0.1"})x");
  CHECK(register_child(2, 3, 2, port).get() == "127.0.0.1");
  auto children = collected.get();
  REQUIRE(children.size() == 2);
  CHECK(children.at(1).address == "127.0.0.1");
  CHECK(children.at(2).address == "127.0.0.1");
  // The silent connection was still waiting for its line when every child had registered: it held no one up.
  timeval limit{5, 0};
  ::setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  char c = 0;
  CHECK(::read(silent, &c, 1) == 0);  // closed unanswered when the collection ended
  ::close(silent);
}

TEST_CASE("the main node listens on the job's interface address only", "[multi_host]") {
  const int port = unused_port();
  RegistrationServer server("127.0.0.1", port);
  std::string why_not;
  const int other = connect_tcp("127.0.0.2", port, std::chrono::seconds(2), &why_not);
  CHECK(other < 0);
  CHECK_THAT(why_not, Catch::Contains("refused"));
  if (other >= 0) ::close(other);
  const int own = connect_tcp("127.0.0.1", port, std::chrono::seconds(2), &why_not);
  CHECK(own >= 0);
  if (own >= 0) ::close(own);
}

TEST_CASE("a child with a different slot count is refused, and the main node names it when it gives up", "[multi_host]") {
  MainNode main;
  auto child = register_child(1, 2, 4, main.port);
  CHECK_THROWS_WITH(main.server.collect(batch_job_node(0, 2), 8, std::chrono::seconds(3), main.waiter),
                    Catch::Contains("1 of 1 child node(s) did not register within 3 s (missing node index 1)") &&
                        Catch::Contains("The last registrations refused: 127.0.0.1: node 1 runs 4 rank(s) but the "
                                        "main node runs 8"));
  CHECK_THROWS_WITH(child.get(), Catch::Contains("refused this node's registration: node 1 runs 4 rank(s)"));
}

TEST_CASE("the main node gives up on missing children after its timeout, naming them", "[multi_host]") {
  MainNode main;
  CHECK_THROWS_WITH(main.server.collect(batch_job_node(0, 3), 1, std::chrono::seconds(1), main.waiter),
                    Catch::Contains("2 of 2 child node(s) did not register within 1 s (missing node index 1, 2)"));
}

TEST_CASE("a child gives up on an unreachable main node after its timeout", "[multi_host]") {
  SignalInbox inbox;
  JobWaiter waiter(inbox);
  CHECK_THROWS_WITH(register_with_main_node(batch_job_node(1, 2), 1, unused_port(), std::chrono::seconds(2), waiter),
                    Catch::Contains("could not register with the main node 127.0.0.1"));
}
