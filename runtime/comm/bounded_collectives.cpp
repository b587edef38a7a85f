#include "runtime/comm/bounded_collectives.h"

#include "runtime/comm/mpi_check.h"

#include <fmt/format.h>

#include <thread>

namespace train::comm {

void wait_bounded(MPI_Request& request, std::chrono::milliseconds timeout, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int polls = 0;; ++polls) {
    int done = 0;
    MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw CollectiveTimeout(fmt::format("{} did not complete within {} s: another rank is stuck or gone; set "
                                 "TRAIN_STEP_TIMEOUT_SECONDS to allow longer",
                                 what, std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
    }
    // Small collectives finish within microseconds: poll hard at first, then stop burning a core.
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void bounded_allreduce(void* buffer, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                       std::chrono::milliseconds timeout, const char* what) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer, count, type, op, comm, &request));
  wait_bounded(request, timeout, what);
}

std::pair<int64_t, int64_t> bounded_min_max(int64_t for_lowest, int64_t for_highest, MPI_Comm comm,
                                            std::chrono::milliseconds timeout, const char* what) {
  int64_t values[2] = {~for_lowest, for_highest};
  bounded_allreduce(values, 2, MPI_INT64_T, MPI_MAX, comm, timeout, what);
  return {~values[0], values[1]};
}

void bounded_barrier(MPI_Comm comm, std::chrono::milliseconds timeout, const char* what) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(comm, &request));
  wait_bounded(request, timeout, what);
}

}  // namespace train::comm
