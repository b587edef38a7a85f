// A process named so that its record outlives it unambiguously: its id, when it started (process ids are
// reused) and its PID namespace (a folder shared between containers, such as /dev/shm under `--ipc=host`,
// may hold records of processes this one cannot see). Lets a job tell a leftover of a dead process from
// something of a live one.
#pragma once

#include <optional>
#include <string>
#include <sys/types.h>

namespace train {

struct ProcessIdentity {
  pid_t pid = -1;
  unsigned long long start_ticks = 0;  // /proc/PID/stat's starttime: clock ticks after boot
  unsigned long long pid_namespace = 0;  // the inode of /proc/self/ns/pid

  // "pid=12 start=3456 pidns=4026531836", and back.
  std::string to_text() const;
  static std::optional<ProcessIdentity> from_text(const std::string& text);
};

// This process.
ProcessIdentity this_process();

// Whether `owner` has surely ended: it lived in this process's PID namespace, and no process with its id
// and start time runs now. False when that cannot be known (another namespace).
bool process_has_ended(const ProcessIdentity& owner);

}  // namespace train
