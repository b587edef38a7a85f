// timeline_check: run under mpirun with R ranks. The timeline's collective pieces:
//  1. clock alignment: every rank measures itself against rank 0 as a host's leader would (each rank taken
//     for a host of its own); on one machine the clocks are one, so every measured offset must be within
//     its own uncertainty of 0 (the estimate is rank 0's reading, taken between the ping and the answer);
//     with the ranks on one host (their real places) the offsets are 0 and measured by rank 0;
//  2. gather_texts: rank 0 gets every rank's text, of different lengths, an empty one included;
//  3. the MPI reducer's bucket hooks: each step every bucket is started once and finished once, after it
//     started, with the plan's bytes; without hooks nothing is called.
// Prints one line per check and "N passed, M failed"; exits non-zero on any failure.
#include "common/monotonic_clock.h"
#include "runtime/comm/gather_text.h"
#include "runtime/comm/gradient_reducer_mpi.h"
#include "runtime/timeline/clock_alignment.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace train;

namespace {

int passed = 0, failed = 0;

void check(bool ok, const std::string& what, int rank) {
  if (!ok) std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  int all_ok = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s: %s\n", all_ok ? "ok" : "FAILED", what.c_str());
  (all_ok ? passed : failed)++;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::chrono::milliseconds timeout(60000);
  try {
    const timeline::ClockAlignment apart =
        timeline::align_clocks(RankIdentity{rank, size, 0, 1}, MPI_COMM_WORLD, timeout);
    const bool within = std::llabs(apart.clock.offset_ns) <= apart.uncertainty_ns;
    if (!within || rank == 1) {
      std::fprintf(stderr, "rank %d: offset %lld ns, uncertainty %lld ns\n", rank,
                   static_cast<long long>(apart.clock.offset_ns), static_cast<long long>(apart.uncertainty_ns));
    }
    check(within && apart.leader == rank && (rank == 0 || apart.uncertainty_ns > 0),
          "each rank as a host of its own: the measured offset is 0 within its uncertainty", rank);
    check(apart.clock.origin_ns > 0 && apart.clock.origin_ns <= monotonic_ns() + apart.clock.offset_ns,
          "the origin is rank 0's clock at the alignment", rank);
    const timeline::ClockAlignment together =
        timeline::align_clocks(RankIdentity{rank, size, rank, size}, MPI_COMM_WORLD, timeout);
    check(together.clock.offset_ns == 0 && together.uncertainty_ns == 0 && together.leader == 0,
          "ranks of one host: offset 0, rank 0 leads", rank);

    const std::string mine(static_cast<size_t>(rank == 1 ? 0 : 1000 * rank + 3), static_cast<char>('a' + rank));
    const std::vector<std::string> texts = comm::gather_texts(mine, MPI_COMM_WORLD, timeout, "the check's texts");
    bool gathered = rank == 0 ? texts.size() == static_cast<size_t>(size) : texts.empty();
    for (size_t r = 0; rank == 0 && r < texts.size(); ++r) {
      gathered = gathered && texts[r] == std::string(r == 1 ? 0 : 1000 * r + 3, static_cast<char>('a' + r));
    }
    check(gathered, "gather_texts: every rank's text on rank 0, by rank", rank);

    comm::MpiGradientReducer reducer(MPI_COMM_WORLD, {1000, 30, 70000, 5, 200000}, 100000, timeout);
    const comm::BucketPlan& plan = reducer.plan();
    float* gradients = reducer.gradients().values;
    std::fill_n(gradients, plan.total_elements, 1.0f);
    std::map<size_t, std::vector<std::string>> seen;
    reducer.set_bucket_hooks(comm::BucketHooks{
        [&](size_t bucket, size_t bytes) { seen[bucket].push_back(fmt::format("start {}", bytes)); },
        [&](size_t bucket, size_t bytes) { seen[bucket].push_back(fmt::format("end {}", bytes)); }});
    bool hooks_right = plan.buckets.size() >= 2;
    for (int step = 0; step < 3; ++step) {
      seen.clear();
      reducer.begin_step();
      for (int p = 4; p >= 0; --p) {
        reducer.tensor_ready(p);
        reducer.progress();
      }
      reducer.finish();
      for (size_t b = 0; b < plan.buckets.size(); ++b) {
        const std::string bytes = std::to_string(plan.bytes(b));
        hooks_right = hooks_right && seen[b] == std::vector<std::string>{"start " + bytes, "end " + bytes};
      }
    }
    check(hooks_right, "MPI reducer: every bucket started, then finished, once per step, with its bytes", rank);
    reducer.set_bucket_hooks({});
    seen.clear();
    reducer.begin_step();
    for (int p = 4; p >= 0; --p) reducer.tensor_ready(p);
    reducer.finish();  // the fourth sum of ones over the ranks
    check(seen.empty() && gradients[0] == std::pow(static_cast<float>(size), 4.0f),
          "MPI reducer: no hooks, no calls; the sums are still reduced", rank);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rank %d: %s\n", rank, error.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (rank == 0) std::printf("%d passed, %d failed\n", passed, failed);
  MPI_Finalize();
  return failed == 0 ? 0 : 1;
}
