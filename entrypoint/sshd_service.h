// The sshd of a multi-host job's host. mpirun reaches the other hosts through it, and workers watch the
// master's to know it is alive. `train` starts the image's sshd as its own child (so it is reaped and
// ended with the job) unless one already answers on this host.
//
// Every container of an image holds the same key pair, so the key alone must not let anyone in: the sshd
// train starts listens only on the job's interface address and lets the user in only from the addresses
// of the hosts that log in here (the master: its mpirun is the one thing that uses ssh). Host keys are
// made at start when the image has none (docker/Dockerfile ships none).
#pragma once

#include "common/environment_map.h"
#include "common/non_copyable.h"
#include "entrypoint/job_waiter.h"
#include "entrypoint/multi_host_settings.h"

#include <string>
#include <vector>
#include <sys/types.h>

namespace train {

class SshdService : private NonCopyable {
 public:
  // Starts sshd listening on `address` alone (this host's address on the job's interface), letting this
  // user log in only from `allowed_from`, and waits (bounded) until it answers on `address`. Throws
  // std::runtime_error with the reason and what to do when it cannot.
  SshdService(const MultiHostSettings& settings, const std::string& address,
              const std::vector<std::string>& allowed_from, const EnvironmentMap& environment, JobWaiter& waiter);
  ~SshdService();

  // Ends our sshd (not one that was already running). Safe to call twice.
  void stop();

  // Our sshd's process id; -1 when we did not start one (or it is gone for good).
  pid_t pid() const { return pid_; }

  // Told that child `pid` exited: when it was our sshd, starts it again (a few times at most) and returns
  // true. Once the job's mpirun runs, nothing of the job needs this host's sshd, but the workers judge
  // the master alive by its answer, and would give up on a master whose sshd died.
  bool restart_if_ours(pid_t pid, int status);

  // One sentence when our sshd died and could not be started again; empty otherwise.
  const std::string& death() const { return death_; }

 private:
  void spawn();

  std::vector<std::string> command_;  // sshd and its arguments, kept to start it again
  EnvironmentMap environment_;
  pid_t pid_ = -1;
  int restarts_ = 0;
  std::string death_;
};

}  // namespace train
