// Rank 0's text (a serialized index, a checkpoint's bytes, a failure's message) on every rank of a
// communicator, whatever its length: MPI's counts are int, so it goes in pieces of at most 1 GiB.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>

namespace train::comm {

// Collective: every rank of `comm` calls it; `text` is rank 0's on return everywhere.
void broadcast_text(std::string& text, MPI_Comm comm);

// The same, each piece's wait bounded by `timeout` (bounded_collectives.h: throws MpiError naming `what`): for
// a broadcast between hosts, where the sender's host may vanish.
void bounded_broadcast_text(std::string& text, MPI_Comm comm, std::chrono::milliseconds timeout, const char* what);

}  // namespace train::comm
