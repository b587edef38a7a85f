// Signals sent to mpirun itself, not through train: SIGTERM, SIGINT or SIGHUP to mpirun's pid make it end the
// ranks and exit with code 1 without a word, so the launcher preloads a witness into mpirun
// (preload/signal_witness.c) that writes down each such signal and its sender before mpirun's own handler
// runs; the job's report names it (entrypoint/job_verdict.cpp).
#pragma once

#include "common/environment_map.h"
#include "common/signal_sender.h"

#include <chrono>
#include <filesystem>
#include <string>
#include <sys/types.h>
#include <vector>

namespace train {

struct MpirunSignal {
  SignalSender sender;
  std::chrono::steady_clock::time_point at{};  // when mpirun received it
};

// Where the witness is: libtrain_signal_witness.so beside this executable (the image installs both there).
std::filesystem::path signal_witness_library();

// `environment` for mpirun with the witness `library` preloaded, writing to `file` (in a folder of the
// launcher's own), ahead of the LD_PRELOAD the job sets, which mpirun and what it starts get back. Unchanged
// when the library is missing.
EnvironmentMap with_signal_witness(EnvironmentMap environment, const std::filesystem::path& file,
                                   const std::filesystem::path& library = signal_witness_library());

// The signals the witness wrote to `file`, in order, leaving out those `launcher` sent (its own SIGTERM when
// it ends mpirun). Lines it cannot read are skipped.
std::vector<MpirunSignal> read_mpirun_signals(const std::filesystem::path& file, pid_t launcher);

}  // namespace train
