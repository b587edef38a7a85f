#include "job/rank_mark.h"

#include "common/atomic_file.h"

#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>

namespace train {
namespace {

// Ours: a regular file this user made. /dev/shm is writable by anyone on a host without containers.
bool is_our_mark(const std::filesystem::path& mark) {
  struct stat status {};
  return ::lstat(mark.c_str(), &status) == 0 && S_ISREG(status.st_mode) && status.st_uid == ::geteuid();
}

}  // namespace

void mark_rank_started(const std::filesystem::path& mark) {
  // Best effort: without /dev/shm the worker still sees the daemon of any job that runs longer than a poll.
  // Made new (never through a planted link, never someone else's file); what stands in its place that is not
  // our mark is removed once and the mark made again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = create_new_file(mark.string());
    if (fd >= 0) {
      ::close(fd);
      return;
    }
    if (errno != EEXIST || is_our_mark(mark)) return;
    ::unlink(mark.c_str());
  }
}

bool ranks_have_started(const std::filesystem::path& mark) { return is_our_mark(mark); }

void clear_rank_mark(const std::filesystem::path& mark) { ::unlink(mark.c_str()); }

}  // namespace train
