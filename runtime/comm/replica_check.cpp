#include "runtime/comm/replica_check.h"

#include "common/log.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/comm/mpi_check.h"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace train::comm {

void check_replicas_agree(const float* values, size_t count, const RankIdentity& identity, MPI_Comm comm,
                          std::chrono::milliseconds timeout) {
  uint64_t own = fnv1a64(values, count * sizeof(float));
  std::vector<uint64_t> all(static_cast<size_t>(identity.size));
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallgather(&own, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm, &request));
  wait_bounded(request, timeout, "the final parameter check");
  std::vector<int> differing;
  for (int rank = 1; rank < identity.size; ++rank) {
    if (all[static_cast<size_t>(rank)] != all[0]) differing.push_back(rank);
  }
  if (!differing.empty()) {
    throw std::runtime_error(fmt::format(
        "the ranks' parameters diverged: rank(s) {} differ from rank 0 after training (a bug in train: please "
        "report it with this log)",
        fmt::join(differing, ", ")));
  }
  if (identity.rank == 0) {
    log_info("parameters identical on all {} ranks (checksum {:016x})", identity.size, all[0]);
  }
}

}  // namespace train::comm
