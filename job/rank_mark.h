// A job's ranks can start and finish between two looks for Open MPI's daemon on a worker host. So every
// rank also leaves a mark in this host's /dev/shm (private to a container, and to each simulated host): a
// worker clears it when it starts and takes it as proof that its ranks have run. The mark is made as a new
// file (never through a symbolic link planted under its name) and counts only as a regular file of ours.
#pragma once

#include <filesystem>

namespace train {

inline const std::filesystem::path default_rank_mark = "/dev/shm/train-ranks-started";

void mark_rank_started(const std::filesystem::path& mark = default_rank_mark);
bool ranks_have_started(const std::filesystem::path& mark = default_rank_mark);
void clear_rank_mark(const std::filesystem::path& mark = default_rank_mark);

}  // namespace train
