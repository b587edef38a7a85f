#include "runtime/timeline/clock_alignment.h"

#include "common/monotonic_clock.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/comm/mpi_check.h"

#include <limits>
#include <vector>

namespace train::timeline {

namespace {

constexpr int ping_tag = 4601, reply_tag = 4602;

// Rank 0's side: answers each of `leader`'s pings with its clock.
void serve(int leader, int round_trips, MPI_Comm comm, std::chrono::milliseconds timeout) {
  for (int i = 0; i < round_trips; ++i) {
    char ping = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Irecv(&ping, 1, MPI_CHAR, leader, ping_tag, comm, &request));
    comm::wait_bounded(request, timeout, "the timeline's clock alignment (rank 0 waiting for a host's ping)");
    const int64_t now = monotonic_ns();
    MPI_CHECK(MPI_Isend(&now, 1, MPI_INT64_T, leader, reply_tag, comm, &request));
    comm::wait_bounded(request, timeout, "the timeline's clock alignment (rank 0 answering a ping)");
  }
}

// A leader's side: the offset to rank 0's clock from the quickest round trip, and half that round trip.
std::pair<int64_t, int64_t> measure(int round_trips, MPI_Comm comm, std::chrono::milliseconds timeout) {
  int64_t best_round_trip = std::numeric_limits<int64_t>::max(), best_offset = 0;
  for (int i = 0; i < round_trips; ++i) {
    char ping = 0;
    int64_t theirs = 0;
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_CHECK(MPI_Irecv(&theirs, 1, MPI_INT64_T, 0, reply_tag, comm, &requests[1]));
    const int64_t sent = monotonic_ns();
    MPI_CHECK(MPI_Isend(&ping, 1, MPI_CHAR, 0, ping_tag, comm, &requests[0]));
    comm::wait_bounded(requests[0], timeout, "the timeline's clock alignment (a ping to rank 0)");
    comm::wait_bounded(requests[1], timeout, "the timeline's clock alignment (rank 0's answer)");
    const int64_t received = monotonic_ns();
    if (received - sent < best_round_trip) {
      best_round_trip = received - sent;
      best_offset = theirs - (sent + (received - sent) / 2);
    }
  }
  return {best_offset, best_round_trip / 2};
}

}  // namespace

ClockAlignment align_clocks(const RankIdentity& identity, MPI_Comm comm, std::chrono::milliseconds timeout,
                            int round_trips) {
  const auto size = static_cast<size_t>(identity.size);
  ClockAlignment alignment;
  alignment.leader = identity.rank - identity.local_rank;
  const bool leader = identity.local_rank == 0;
  // Which ranks lead another host than rank 0's, for rank 0 to serve in turn.
  std::vector<int> leads(size, 0);
  if (leader && identity.rank != 0) leads[static_cast<size_t>(identity.rank)] = 1;
  comm::bounded_allreduce(leads.data(), identity.size, MPI_INT, MPI_MAX, comm, timeout,
                          "the timeline's clock alignment (the hosts' first ranks)");
  // [0, size): each leader's offset; [size, 2 size): its uncertainty; [2 size]: the origin.
  std::vector<int64_t> found(2 * size + 1, 0);
  if (identity.rank == 0) {
    for (size_t r = 1; r < size; ++r) {
      if (leads[r] != 0) serve(static_cast<int>(r), round_trips, comm, timeout);
    }
    found[2 * size] = monotonic_ns();
  } else if (leads[static_cast<size_t>(identity.rank)] != 0) {
    const auto [offset, uncertainty] = measure(round_trips, comm, timeout);
    found[static_cast<size_t>(identity.rank)] = offset;
    found[size + static_cast<size_t>(identity.rank)] = uncertainty;
  }
  comm::bounded_allreduce(found.data(), static_cast<int>(found.size()), MPI_INT64_T, MPI_SUM, comm, timeout,
                          "the timeline's clock alignment (the hosts' offsets)");
  alignment.clock.offset_ns = found[static_cast<size_t>(alignment.leader)];
  alignment.uncertainty_ns = found[size + static_cast<size_t>(alignment.leader)];
  alignment.clock.origin_ns = found[2 * size];
  return alignment;
}

}  // namespace train::timeline
