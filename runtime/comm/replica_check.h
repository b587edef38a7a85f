// Data-parallel ranks must end with bit-identical parameters (every rank applies the same averaged
// gradients). Checking it costs one small allgather of a checksum per rank, and turns a silent divergence
// (a reduction bug, a rank on different hyperparameters) into an error naming the ranks that differ.
#pragma once

#include "common/fnv1a.h"  // fnv1a64
#include "job/rank_environment.h"

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace train::comm {

// Compares every rank's checksum of `values`; rank 0 logs the agreement ("parameters identical on all N
// ranks"), every rank throws std::runtime_error naming the ranks that differ from rank 0.
void check_replicas_agree(const float* values, size_t count, const RankIdentity& identity, MPI_Comm comm,
                          std::chrono::milliseconds timeout);

}  // namespace train::comm
