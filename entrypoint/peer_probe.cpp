#include "entrypoint/peer_probe.h"

#include "entrypoint/network_probe.h"

#include <atomic>
#include <fcntl.h>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace train {

std::vector<ProbeResult> probe_ssh_in_parallel(const std::vector<std::string>& addresses, int port,
                                               std::chrono::milliseconds probe_timeout,
                                               const std::function<bool()>& keep_going) {
  std::vector<ProbeResult> results(addresses.size());
  int cancel[2];  // a byte written to cancel[1] makes cancel[0] readable: every probe ends at once
  if (::pipe2(cancel, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe to cancel the probes");
  std::atomic<size_t> finished{0};
  std::atomic<bool> cancelled{false};
  std::vector<std::thread> probes;
  probes.reserve(addresses.size());
  for (size_t i = 0; i < addresses.size(); ++i) {
    probes.emplace_back([&, i] {
      results[i].answered = ssh_answers(addresses[i], port, probe_timeout, &results[i].why_not, cancel[0]);
      results[i].cut_short = !results[i].answered && cancelled.load();
      ++finished;
    });
  }
  while (finished.load() < addresses.size()) {
    if (!keep_going()) {
      cancelled = true;
      const char byte = 1;
      [[maybe_unused]] ssize_t written = ::write(cancel[1], &byte, 1);
      break;
    }
  }
  for (auto& probe : probes) probe.join();
  ::close(cancel[0]);
  ::close(cancel[1]);
  return results;
}

}  // namespace train
