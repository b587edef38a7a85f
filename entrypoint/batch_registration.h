// AWS Batch multi-node jobs give children the main node's address but tell the main node nothing about
// the children. Each child therefore registers over TCP: one JSON line with its node index, address and
// slot count, answered by one JSON line accepting or refusing it. The main node waits (bounded) until
// every child has registered, then launches as a SageMaker master would.
#pragma once

#include "entrypoint/job_waiter.h"
#include "job/cluster.h"

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

namespace train {

struct NodeRegistration {
  int node_index = 0;
  std::string address;  // as the main node sees the child's connection
  int slots = 0;
};

// Thrown when a registration cannot complete; the message says why and what to do.
struct RegistrationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class RegistrationServer {
 public:
  // Listens on every address at `port`. Throws RegistrationError when the port is taken.
  explicit RegistrationServer(int port);
  ~RegistrationServer();
  RegistrationServer(const RegistrationServer&) = delete;
  RegistrationServer& operator=(const RegistrationServer&) = delete;

  // Accepts registrations until every child of `node` has registered (a child that registers again, as
  // after a restart, replaces its earlier entry). Returns every child by node index. Throws
  // RegistrationError when `timeout` passes first or a child's slot count differs from `slots`; returns an
  // empty map when a stop signal arrives.
  std::map<int, NodeRegistration> collect(const BatchNodeInfo& node, int slots, std::chrono::seconds timeout,
                                          JobWaiter& waiter);

  // This node's address as the children reach it (known once one has registered).
  const std::string& own_address() const { return own_address_; }

  // From now on, answer every registration with a refusal giving `reason` (in a background thread, until
  // this server is destroyed), so a late or restarted child learns at once that it is not part of the job.
  void refuse_from_now_on(std::string reason);

 private:
  int port_ = 0;
  int listen_fd_ = -1;
  std::string own_address_;
  std::atomic<bool> stopping_{false};
  std::thread refuser_;
};

// A child's side: registers with the main node, retrying until it accepts or `timeout` passes. Returns
// this node's own address as used to reach the main node. Throws RegistrationError (refused, timed out);
// returns an empty string when a stop signal arrives.
std::string register_with_main_node(const BatchNodeInfo& node, int slots, int port, std::chrono::seconds timeout,
                                    JobWaiter& waiter);

}  // namespace train
