// Whether the job's ranks are on this host: Open MPI starts them under its daemon, `orted` (Open MPI 4)
// or `prted` (Open MPI 5), which the master's mpirun starts here through ssh.
#pragma once

#include <sys/types.h>
#include <vector>

namespace train {

// Open MPI daemons running in this host's network and UTS namespaces (a container, or one simulated host
// on a shared machine: processes of other namespaces are someone else's).
std::vector<pid_t> mpi_daemons_on_this_host();

}  // namespace train
