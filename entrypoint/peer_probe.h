// The master's look at every other host's sshd, all at once: probed one after another, a hundred silent
// hosts took minutes per round, and the master noticed its deadline and SIGTERM only between rounds.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace train {

struct ProbeResult {
  bool answered = false;
  bool cut_short = false;  // cancelled before it could tell
  std::string why_not;     // when not answered: refused, no answer within the time, not an SSH server
};

// Probes `addresses` (port `port`) in parallel, each probe bounded by `probe_timeout`. While they run,
// `keep_going` is called again and again and should wait a little each time (the master's waits 100 ms,
// handling signals); once it returns false the probes still running are cancelled and this returns within
// milliseconds (those count as unanswered).
std::vector<ProbeResult> probe_ssh_in_parallel(const std::vector<std::string>& addresses, int port,
                                               std::chrono::milliseconds probe_timeout,
                                               const std::function<bool()>& keep_going);

}  // namespace train
