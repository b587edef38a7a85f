// `train rank-exec -- CMD ARGS...`: what mpirun starts on each rank for `train -- CMD ARGS...`. It gives
// the user's program this host's SM_* variables, turns the launcher's stop request (SIGUSR2, which mpirun
// forwards to every rank's process group) into the SIGTERM programs expect, and ends exactly as the
// program ended.
//
// The program runs in a process group of its own: mpirun signals the rank's whole group, and SIGUSR2 must
// reach rank-exec alone (a program that does not expect SIGUSR2 dies of it). Signals are passed on to the
// program's group. rank-exec is a child subreaper: whatever the program leaves running when it ends (a
// daemon that still holds the rank's output open would keep mpirun waiting for it) is ended before
// rank-exec itself ends. When the program fails, rank-exec says so in one line (rank_end_report in
// mpirun_outcome.h), so the launcher can name the failing rank even where mpirun does not.
#pragma once

#include <string>
#include <vector>

namespace train {

int run_rank_exec(const std::vector<std::string>& command);

}  // namespace train
