// One clock for the timeline of the whole job. The ranks of a host share its monotonic clock; a host's
// clock is put on rank 0's by the host's first rank (its leader: ranks are placed on hosts in order, so the
// leader of rank r is r - local_rank), which measures the offset with round trips to rank 0 over MPI, as
// NTP does: of `round_trips` exchanges the quickest gives the offset, with half its round trip as the
// uncertainty. Every rank of the host takes its leader's offset.
#pragma once

#include "job/rank_environment.h"
#include "runtime/timeline/trace_json.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>

namespace train::timeline {

struct ClockAlignment {
  TraceClock clock;            // this rank's offset to rank 0's clock, and the job's origin
  int64_t uncertainty_ns = 0;  // 0 on rank 0's host
  int leader = 0;              // the rank that measured it
};

// Collective; every wait bounded by `timeout`.
ClockAlignment align_clocks(const RankIdentity& identity, MPI_Comm comm, std::chrono::milliseconds timeout,
                            int round_trips = 16);

}  // namespace train::timeline
