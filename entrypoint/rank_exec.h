// `train rank-exec -- CMD ARGS...`: what mpirun starts on each rank for `train -- CMD ARGS...`. It gives
// the user's program this host's SM_* variables, turns the launcher's stop request (SIGUSR2, which mpirun
// forwards to every rank) into the SIGTERM programs expect, and ends exactly as the program ended.
#pragma once

#include <string>
#include <vector>

namespace train {

int run_rank_exec(const std::vector<std::string>& command);

}  // namespace train
