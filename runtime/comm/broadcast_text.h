// Rank 0's text (a serialized index, a checkpoint's bytes, a failure's message) on every rank of a
// communicator, whatever its length: MPI's counts are int, so it goes in pieces of at most 1 GiB.
#pragma once

#include <mpi.h>

#include <string>

namespace train::comm {

// Collective: every rank of `comm` calls it; `text` is rank 0's on return everywhere.
void broadcast_text(std::string& text, MPI_Comm comm);

}  // namespace train::comm
