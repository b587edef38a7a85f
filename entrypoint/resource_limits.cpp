#include "entrypoint/resource_limits.h"

#include "common/log.h"
#include "common/memory_facts.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace train {

namespace {

struct LimitWords {
  const char* name;     // "RLIMIT_NOFILE"
  const char* meaning;  // "open files"
  const char* ulimit;   // "ulimit -n"
  const char* docker;   // "--ulimit nofile=1048576"
};

LimitWords words_of(int resource) {
  if (resource == RLIMIT_FSIZE) return {"RLIMIT_FSIZE", "a file's size", "ulimit -f", "--ulimit fsize=-1"};
  return {"RLIMIT_NOFILE", "open files", "ulimit -n", "--ulimit nofile=1048576"};
}

std::string amount(int resource, rlim_t value) {
  if (value == RLIM_INFINITY) return "unlimited";
  if (resource == RLIMIT_FSIZE) return fmt::format("{} bytes ({})", value, memory_text(value));
  return fmt::format("{}", value);
}

// "mpirun and 2 ranks on each of 1 host need at least 88 descriptors"
std::string need_text(const LimitNeed& need) {
  if (need.resource == RLIMIT_FSIZE) return fmt::format("{} needs at least {}", need.who, amount(need.resource, need.least));
  return fmt::format("{} need at least {} descriptors", need.who, need.least);
}

// What to run before train: `ulimit -n 88`, `ulimit -f unlimited` (bash counts a file's size in KiB).
std::string ulimit_command(const LimitNeed& need) {
  if (need.resource == RLIMIT_FSIZE) return "ulimit -f unlimited";
  return fmt::format("ulimit -n {}", need.least);
}

}  // namespace

LimitNeed open_files_need(const JobDescription& job) {
  const auto hosts = job.cluster.hosts.size();
  LimitNeed need;
  need.resource = RLIMIT_NOFILE;
  need.least = 64 + 8 * static_cast<uint64_t>(std::max(1, job.ranks_per_host)) + 8 * static_cast<uint64_t>(hosts);
  need.who = fmt::format("mpirun and {} rank{} on each of {} host{}", job.ranks_per_host,
                          job.ranks_per_host == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s");
  return need;
}

std::optional<LimitNeed> file_size_need(const JobDescription& job, std::optional<uint64_t> checkpoint_bytes) {
  // Rank 0, on the master, writes the checkpoints and the model; the other hosts' ranks write no large file.
  if (job.workload != Workload::train_resnet || !checkpoint_bytes || !job.cluster.is_master()) return std::nullopt;
  LimitNeed need;
  need.resource = RLIMIT_FSIZE;
  need.least = *checkpoint_bytes;
  need.who = fmt::format("the checkpoint of ResNet-{}", job.hyperparameters.num_layers);
  return need;
}

LimitDecision decide_limit(const LimitNeed& need, rlim_t soft, rlim_t hard) {
  LimitDecision decision;
  const auto enough = [&](rlim_t limit) { return limit == RLIM_INFINITY || limit >= need.least; };
  if (enough(soft)) return decision;
  if (enough(hard)) {
    decision.raise_soft_to = hard;
    return decision;
  }
  const LimitWords words = words_of(need.resource);
  decision.refusal = fmt::format(
      "The job cannot run with this process's limit on {} ({}, `{}`): {} (soft) and {} (hard), where {}. Start train "
      "with a higher limit: `{}` (as root) before it, or `docker run {}`.",
      words.meaning, words.name, words.ulimit, amount(need.resource, soft), amount(need.resource, hard),
      need_text(need), ulimit_command(need), words.docker);
  return decision;
}

std::optional<std::string> apply_limits(const LimitNeed& open_files, const std::optional<LimitNeed>& file_size) {
  for (const LimitNeed* need : {&open_files, file_size ? &*file_size : nullptr}) {
    if (need == nullptr) continue;
    rlimit limit{};
    if (::getrlimit(need->resource, &limit) != 0) continue;
    const LimitDecision decision = decide_limit(*need, limit.rlim_cur, limit.rlim_max);
    if (decision.refusal) return decision.refusal;
    if (!decision.raise_soft_to) continue;
    const LimitWords words = words_of(need->resource);
    const rlimit raised{*decision.raise_soft_to, limit.rlim_max};
    if (::setrlimit(need->resource, &raised) != 0) {
      return fmt::format("The job cannot run with this process's limit on {} ({}): {}, where {}, and raising it to "
                         "its hard limit {} failed: {}.",
                         words.meaning, words.name, amount(need->resource, limit.rlim_cur), need_text(*need),
                         amount(need->resource, limit.rlim_max), std::strerror(errno));
    }
    log_info("raised the limit on {} (`{}`) from {} to its hard limit, {}: {}", words.meaning, words.ulimit,
             amount(need->resource, limit.rlim_cur), amount(need->resource, limit.rlim_max), need_text(*need));
  }
  return std::nullopt;
}

}  // namespace train
