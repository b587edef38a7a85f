// The peak memory of each rank on this host, as the launcher sees it from outside: a rank killed by SIGKILL
// (the out-of-memory killer, usually) cannot say it itself. The launcher samples its ranks' processes (mpirun's
// descendants that carry OMPI_COMM_WORLD_RANK) ten times a second at first, twice a second later, and keeps
// each rank's highest VmHWM, the kernel's record of a process's peak resident memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <sys/types.h>

namespace train {

class RankMemoryWatch {
 public:
  // Samples the ranks below `root` (mpirun) when the last sample is old enough: every 100 ms in the job's
  // first 30 s (a batch far too large is usually killed within half a second of the rank's start, when the
  // engine reserves its buffers), every 500 ms after that.
  void sample_if_due(pid_t root);
  static constexpr std::chrono::milliseconds young_every{100};
  static constexpr std::chrono::seconds young_for{30};
  static constexpr std::chrono::milliseconds every{500};
  // The highest peak seen of a process of rank `rank`.
  std::optional<uint64_t> peak(int rank) const;
  // Every rank's highest peak seen.
  const std::map<int, uint64_t>& peaks() const { return peaks_; }

 private:
  std::chrono::steady_clock::time_point first_{};
  std::chrono::steady_clock::time_point next_{};
  std::map<pid_t, int> rank_of_;  // the ranks' processes seen, and their ranks
  std::map<int, uint64_t> peaks_;
};

}  // namespace train
