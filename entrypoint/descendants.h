// Finding and ending whatever this process still has below it, so `train` never exits with a process
// of the job left behind (as PID 1 it would take them down uncleanly; elsewhere they would leak).
#pragma once

#include <chrono>
#include <functional>
#include <set>
#include <sys/types.h>
#include <vector>

namespace train {

// Every process id in /proc.
std::vector<pid_t> all_process_ids();

// Direct children of `parent` (orphans re-parented to a subreaper included), read from /proc.
std::vector<pid_t> children_of(pid_t parent);

// Every process below `root` (children, their children, ...), from one pass over /proc.
std::vector<pid_t> descendants_of(pid_t root);

// Reaps every child that has exited; `on_exit(pid, status)` is called for each. Returns how many.
int reap_exited_children(const std::function<void(pid_t, int)>& on_exit);

// Ends every remaining child of this process except those in `spare`: SIGTERM, then SIGKILL after `grace`,
// reaping all, until none is left or `limit` has passed. Returns the number still alive at the end (0
// unless the kernel refuses).
int end_all_children(std::chrono::milliseconds grace, std::chrono::milliseconds limit,
                     const std::function<void(pid_t, int)>& on_exit, const std::set<pid_t>& spare = {});

}  // namespace train
