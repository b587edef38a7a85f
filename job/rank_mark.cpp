#include "job/rank_mark.h"

#include <fcntl.h>
#include <unistd.h>

namespace train {
namespace {

constexpr const char* rank_mark = "/dev/shm/train-ranks-started";

}  // namespace

void mark_rank_started() {
  // Best effort: without /dev/shm the worker still sees the daemon of any job that runs longer than a poll.
  int fd = ::open(rank_mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) ::close(fd);
}

bool ranks_have_started() { return ::access(rank_mark, F_OK) == 0; }

void clear_rank_mark() { ::unlink(rank_mark); }

}  // namespace train
