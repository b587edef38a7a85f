// A rank's stop request: SIGUSR2 (what the launcher sends through mpirun) or SIGTERM/SIGINT (a direct
// signal) set a flag that the training loop reads between steps, so it can checkpoint and exit cleanly.
//
// Only SIGUSR2 is the job's own request. A SIGTERM or SIGINT that reaches one rank from anything but the
// rank's parent (mpirun, or Open MPI's daemon on its host, ending the job) is a stop the job did not ask for:
// the ranks still checkpoint and stop together, but that rank then fails the job, naming the signal and its
// sender (kept from the handler's siginfo), so that a job that did not finish is never reported a success
// (issue 31: it wrote output/success with model/ empty).
#pragma once

#include "common/signal_sender.h"
#include "job/rank_environment.h"

#include <cstdint>
#include <optional>
#include <string>

namespace train {

void install_stop_handlers();
bool stop_requested();
int stop_signal();  // the first signal that asked, 0 if none

// The first stop signal this rank received and who sent it; nullopt when none did.
std::optional<SignalSender> stop_sender();

// After the ranks agreed to stop and wrote their checkpoint at `step` of `total_steps`: 0 when the job asked
// for the stop (or this rank got no signal: another rank's), else the failure's exit code, 128 + the signal,
// once this rank's reason (job/rank_reason.h) is written and logged.
int exit_code_after_stop(const RankIdentity& identity, const std::string& host, int64_t step, int64_t total_steps);

}  // namespace train
