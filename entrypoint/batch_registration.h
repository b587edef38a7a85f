// AWS Batch multi-node jobs give children the main node's address but tell the main node nothing about
// the children. Each child therefore registers over TCP: one JSON line with the job's ID, its node index
// and slot count, answered by one JSON line accepting or refusing it. The main node waits (bounded) until
// every child has registered, then launches as a SageMaker master would.
//
// Anyone who reaches the port can send a line, so the main node accepts only what the job's own nodes
// send: it listens on the job's interface alone, and a registration must name the job (AWS_BATCH_JOB_ID),
// a child's node index not taken by another address, and the main node's slot count. Anything else is
// refused, logged with the sender's address, and the main node keeps waiting for the real node.
#pragma once

#include "common/non_copyable.h"
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

class RegistrationServer : private NonCopyable {
 public:
  // Listens on `address` (this node's address on the job's interface) at `port`. Throws RegistrationError
  // when it cannot (the port is taken).
  RegistrationServer(const std::string& address, int port);
  ~RegistrationServer();

  // Accepts registrations until every child of `node` has registered, and returns every child by node
  // index. A registration is refused (answered, logged with the sender's address, and otherwise ignored)
  // unless it names `node.job_id`, a child's node index that no other address holds, and `slots` ranks; the
  // same node registering again from the same address is accepted again. Throws RegistrationError when
  // `timeout` passes first, naming the missing nodes and the last refusals; returns an empty map when a
  // stop signal arrives.
  std::map<int, NodeRegistration> collect(const BatchNodeInfo& node, int slots, std::chrono::seconds timeout,
                                          JobWaiter& waiter);

  // From now on, answer every registration with a refusal giving `reason` (in a background thread, until
  // this server is destroyed), so a late or restarted child learns at once that it is not part of the job.
  void refuse_from_now_on(std::string reason);

 private:
  std::string address_;
  int port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread refuser_;
};

// A child's side: registers with the main node under the job's ID, retrying until it accepts or `timeout`
// passes. Returns this node's own address as used to reach the main node. Throws RegistrationError
// (refused, timed out); returns an empty string when a stop signal arrives.
std::string register_with_main_node(const BatchNodeInfo& node, int slots, int port, std::chrono::seconds timeout,
                                    JobWaiter& waiter);

}  // namespace train
