// Collectives that give up: a rank that hangs (stopped, deadlocked, on a host that vanished without
// closing its sockets) would leave every other rank blocked in MPI_Allreduce or MPI_Barrier forever. These
// run the non-blocking form and throw MpiError, naming `what` and TRAIN_STEP_TIMEOUT_SECONDS, once
// `timeout` passes; the rank's error then ends the job through mpirun.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <utility>

namespace train::comm {

void bounded_allreduce(void* buffer, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                       std::chrono::milliseconds timeout, const char* what);

void bounded_barrier(MPI_Comm comm, std::chrono::milliseconds timeout, const char* what);

// The lowest of every rank's `for_lowest` and the highest of every rank's `for_highest`, in one bounded
// allreduce (MPI_MAX of {~for_lowest, for_highest}: the complement turns a lowest into a highest for every value,
// where negation would overflow). Equal for one value on every rank: whether all ranks agree on it.
std::pair<int64_t, int64_t> bounded_min_max(int64_t for_lowest, int64_t for_highest, MPI_Comm comm,
                                            std::chrono::milliseconds timeout, const char* what);

// Waits for `request` (polling, so the wait can end); throws MpiError after `timeout`.
void wait_bounded(MPI_Request& request, std::chrono::milliseconds timeout, const char* what);

}  // namespace train::comm
