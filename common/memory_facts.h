// What a report about running out of memory says: how much memory the host has, the limit of the container
// (its memory cgroup) when one applies, how often the kernel's out-of-memory killer struck in it, and a
// process's peak memory. Read from /proc and the cgroup file system, cgroup v2 or v1; anything unreadable is
// left out (nullopt).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace train {

// The host's memory (MemTotal).
std::optional<uint64_t> host_memory_bytes();

// The memory limit of this process's cgroup (v2 memory.max, v1 memory.limit_in_bytes); nullopt when there
// is none (or it is no lower than the host's memory).
std::optional<uint64_t> cgroup_memory_limit_bytes();

// How many processes the out-of-memory killer has ended in this process's cgroup so far (v2 memory.events
// oom_kill, v1 memory.oom_control oom_kill).
std::optional<uint64_t> cgroup_out_of_memory_kills();

// This process's peak resident memory (getrusage ru_maxrss).
uint64_t own_peak_memory_bytes();

// This process's resident memory now (/proc/self/statm); nullopt when unreadable.
std::optional<uint64_t> own_resident_memory_bytes();

// "3.2 GiB", "512 MiB".
std::string memory_text(uint64_t bytes);

// "this host has 23.4 GiB of memory, the container may use 8.0 GiB": the host's memory and the cgroup's limit.
std::string host_memory_text();

}  // namespace train
