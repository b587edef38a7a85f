// A rank's stop request: SIGUSR2 (what the launcher sends through mpirun) or SIGTERM/SIGINT (a direct
// signal) set a flag that the training loop reads between steps, so it can checkpoint and exit cleanly.
#pragma once

namespace train {

void install_stop_handlers();
bool stop_requested();
int stop_signal();  // the signal that asked, 0 if none

}  // namespace train
