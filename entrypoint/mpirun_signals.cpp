#include "entrypoint/mpirun_signals.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>

namespace train {

std::filesystem::path signal_witness_library() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path() : self.parent_path() / "libtrain_signal_witness.so";
}

EnvironmentMap with_signal_witness(EnvironmentMap environment, const std::filesystem::path& file,
                                   const std::filesystem::path& library) {
  std::error_code error;
  if (library.empty() || !std::filesystem::exists(library, error)) return environment;
  const std::string given = lookup(environment, "LD_PRELOAD").value_or("");
  environment["TRAIN_SIGNAL_WITNESS_PRELOAD"] = given;
  environment["LD_PRELOAD"] = library.string() + (given.empty() ? "" : ":" + given);
  environment["TRAIN_SIGNAL_WITNESS"] = file.string();
  return environment;
}

std::vector<MpirunSignal> read_mpirun_signals(const std::filesystem::path& file, pid_t launcher) {
  std::vector<MpirunSignal> signals;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    int signal_number = 0, code = 0;
    long long pid = 0, uid = 0;
    int64_t monotonic_ns = 0;
    int command_at = -1;
    if (std::sscanf(line.c_str(), "signal=%d pid=%lld uid=%lld code=%d monotonic_ns=%" SCNd64 " command=%n",
                    &signal_number, &pid, &uid, &code, &monotonic_ns, &command_at) != 5 ||
        command_at < 0) {
      continue;
    }
    MpirunSignal seen;
    seen.sender.signal = signal_number;
    seen.sender.from_kernel = code > 0 || code == SI_KERNEL;
    seen.sender.pid = static_cast<pid_t>(pid);
    seen.sender.uid = static_cast<uid_t>(uid);
    seen.sender.command = line.substr(static_cast<size_t>(command_at));
    // steady_clock is CLOCK_MONOTONIC on Linux, the clock the witness reads.
    seen.at = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(monotonic_ns));
    if (!seen.sender.from_kernel && seen.sender.pid == launcher) continue;
    signals.push_back(std::move(seen));
  }
  return signals;
}

}  // namespace train
