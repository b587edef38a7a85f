// Every rank's text on rank 0 (the timeline's parts and summaries): the lengths, then the texts in one
// gatherv, both bounded. Texts are at most 2 GiB altogether (MPI's counts are int).
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

namespace train::comm {

// Collective: every rank of `comm` calls it. On rank 0 every rank's text, by rank; empty elsewhere. Throws
// MpiError when the texts are too long together, CollectiveTimeout after `timeout` (naming `what`).
std::vector<std::string> gather_texts(const std::string& mine, MPI_Comm comm, std::chrono::milliseconds timeout,
                                      const char* what);

}  // namespace train::comm
