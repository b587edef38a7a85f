// A job's ranks can start and finish between two looks for Open MPI's daemon on a worker host. So every
// rank also leaves a mark in this host's /dev/shm (private to a container, and to each simulated host): a
// worker clears it when it starts and takes it as proof that its ranks have run.
#pragma once

namespace train {

void mark_rank_started();
bool ranks_have_started();
void clear_rank_mark();

}  // namespace train
