#include "entrypoint/job_verdict.h"

#include "common/exit_codes.h"
#include "common/memory_facts.h"
#include "entrypoint/child_process.h"
#include "entrypoint/mpirun_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <sys/wait.h>

namespace train {

namespace {

std::string mpirun_ending(const JobEndFacts& facts) {
  return facts.mpirun_status ? describe_wait_status(*facts.mpirun_status) : "did not report its status";
}

// What the failure file says after a stop request: whether train's ranks wrote a checkpoint since (a second
// signal, or the grace period running out, can end them before they do).
std::string stop_outcome(const JobDescription& job, const JobEndFacts& facts) {
  if (job.workload != Workload::train_resnet) return "";
  if (facts.checkpoint_after_stop) {
    return fmt::format(" A checkpoint was written after the stop request ({}): a restarted job resumes from it.",
                       (job.outputs.checkpoints / JobPaths::checkpoint_file_name).string());
  }
  return fmt::format(" No checkpoint was written after the stop request (the ranks were ended first); a restarted "
                     "job resumes from the last earlier checkpoint in {}, if there is one.",
                     job.outputs.checkpoints.string());
}

// The first failing rank. The ranks' own accounts name it even when mpirun did not get to, and the earliest
// of them is the first failure, whichever rank mpirun's abort message happens to name; mpirun's word stands
// when the rank it names left none (killed by a signal, or on another host).
std::optional<RankFailure> first_failure(const JobEndFacts& facts) {
  const auto& reasons = facts.reasons;
  std::optional<RankFailure> failure = facts.mpirun_messages.first_failure();
  const bool named_rank_has_reason =
      failure &&
      std::any_of(reasons.begin(), reasons.end(), [&](const RankReason& r) { return r.rank == failure->rank; });
  if (!reasons.empty() && (!failure || named_rank_has_reason)) {
    const RankReason& first = reasons.front();
    failure = RankFailure{first.rank, std::nullopt, std::nullopt, ""};
    if (first.signal != 0) {
      failure->signal = first.signal;
    } else {
      failure->exit_code = first.exit_code;
    }
  }
  return failure;
}

// The reason's lines as the rank logged them ("[train] error: ..."), unless mpirun relayed them already.
void add_reason(const RankReason& reason, std::vector<std::string>& details) {
  if (reason.lines.empty()) return;
  const std::string first = "[train] error: " + reason.lines.front();
  if (std::find(details.begin(), details.end(), first) != details.end()) return;
  details.push_back(first);
  details.insert(details.end(), reason.lines.begin() + 1, reason.lines.end());
}

// What a rank killed by SIGKILL is told: whether the out-of-memory killer struck in this container during
// the job (its cgroup's count), the rank's peak memory as last seen, the host's memory and the batch.
std::string out_of_memory_hint(const JobDescription& job, const JobEndFacts& facts, int rank) {
  const auto& before = facts.oom_kills_at_start;
  const auto& after = facts.oom_kills_at_end;
  const uint64_t struck = after && before && *after > *before ? *after - *before : 0;
  const auto peak = facts.rank_peaks.find(rank);
  const std::string memory =
      (peak != facts.rank_peaks.end()
           ? fmt::format("rank {}'s memory had peaked at {} when last seen; ", rank, memory_text(peak->second))
           : "") +
      facts.host_memory;
  const std::string remedy =
      (job.workload == Workload::train_resnet
           ? fmt::format("lower mini_batch_size ({} images per host over {} ranks) or image_shape",
                         job.hyperparameters.mini_batch_size, job.ranks_per_host)
           : std::string("use less memory per rank")) +
      ", run fewer ranks per host (processes_per_host), or use an instance with more memory";
  if (struck > 0) {
    return fmt::format("The kernel's out-of-memory killer ended {} process{} of this container during the job ({}): "
                       "{}.",
                       struck, struck == 1 ? "" : "es", memory, remedy);
  }
  return fmt::format("SIGKILL is often the kernel's out-of-memory killer ({}); if it was, {}.", memory, remedy);
}

JobVerdict rank_failed(const JobDescription& job, const JobEndFacts& facts, const RankFailure& failure,
                       int mpirun_code) {
  JobVerdict verdict;
  // Our name for the host (SageMaker's algo-N), not the machine name mpirun may know it by.
  std::string host = host_of_rank(job, failure.rank);
  if (host == "?" && !failure.node.empty()) host = failure.node;
  const std::string how =
      failure.signal ? fmt::format("was killed by signal {} ({})", *failure.signal, signal_name(*failure.signal))
                     : fmt::format("exited with code {}", failure.exit_code.value_or(mpirun_code));
  verdict.summary = fmt::format("Rank {} of {} on host {} {}.", failure.rank, job.world_size(), host, how);
  auto& details = verdict.details;
  const auto headline = std::find_if(facts.reasons.begin(), facts.reasons.end(), [&](const RankReason& reason) {
    return reason.rank == failure.rank && reason.kind == RankReasonKind::headline && !reason.lines.empty();
  });
  if (headline != facts.reasons.end()) {
    // The rank's sentence about the whole job (a stop it did not ask for, hosts that differ) is the report's.
    verdict.summary = headline->lines.front();
    details.assign(headline->lines.begin() + 1, headline->lines.end());
  } else {
    if (auto tail = facts.error_tails.find(failure.rank); tail != facts.error_tails.end()) details = tail->second;
    for (const auto& reason : facts.reasons) {
      if (reason.rank == failure.rank) add_reason(reason, details);
    }
    if (details.empty()) details.push_back("(the rank wrote nothing to its error output)");
  }
  if (failure.signal == SIGKILL) details.push_back(out_of_memory_hint(job, facts, failure.rank));
  verdict.exit_code = failure.code() != 0 ? failure.code() : mpirun_code;
  if (facts.teardown_forced_after) {
    details.push_back(fmt::format(
        "(mpirun did not end within {} s of the ranks' failure, waiting for a host it could no longer reach or "
        "a rank that would not end; train ended it and every process it had started)",
        facts.teardown_forced_after->count()));
  }
  return verdict;
}

// mpirun's own lines, a lost host's sentence first.
std::vector<std::string> mpirun_own_words(const JobEndFacts& facts) {
  std::vector<std::string> words = facts.mpirun_messages.own_error_lines();
  if (const auto& lost = facts.mpirun_messages.lost_daemon_sentence(); !lost.empty()) words.insert(words.begin(), lost);
  return words;
}

// mpirun refused its command line: the part of it that is the user's is custom_mpi_options.
JobVerdict mpirun_refused(const JobDescription& job, const JobEndFacts& facts) {
  JobVerdict verdict;
  verdict.exit_code = exit_code::launch_failed;
  verdict.summary = fmt::format("mpirun refused its command line: {}.", facts.mpirun_messages.usage_error());
  const auto options = job.hyperparameters.custom_mpi_words();
  if (!options.empty()) {
    verdict.details.push_back(fmt::format("The hyperparameter custom_mpi_options adds \"{}\" to it; check those "
                                          "options against the image's `mpirun --help`.",
                                          fmt::join(options, " ")));
  }
  const auto own = mpirun_own_words(facts);
  verdict.details.insert(verdict.details.end(), own.begin(), own.end());
  return verdict;
}

}  // namespace

JobVerdict decide_job_verdict(const JobDescription& job, const JobEndFacts& facts) {
  const int mpirun_code =
      facts.mpirun_status ? exit_code_from_wait_status(*facts.mpirun_status) : exit_code::internal_error;
  // A stop request that came after a rank had failed does not hide that failure: the rank's reason is the
  // job's (a stop is what an operator does to a job that seems to hang).
  const StopSignal* stop = facts.stop_signals.empty() ? nullptr : &facts.stop_signals.front();
  const bool failed_before_stop = facts.failure_seen && (!stop || *facts.failure_seen <= stop->at);
  if (stop && !failed_before_stop) {
    JobVerdict verdict;
    verdict.kind = JobVerdict::Kind::stopped;
    verdict.exit_code = exit_code::signal_base + stop->signal;
    verdict.summary = fmt::format(
        "The job was stopped by {} (SageMaker's stop or a spot interruption); the ranks were asked to checkpoint "
        "and exit, and mpirun then {}.{}",
        signal_name(stop->signal), facts.mpirun_status ? describe_wait_status(*facts.mpirun_status) : "did not exit",
        stop_outcome(job, facts));
    return verdict;
  }
  // A signal sent to mpirun itself, not through train, before any rank failed: mpirun ended the ranks on it.
  if (!facts.mpirun_signals.empty() && (!facts.failure_seen || facts.mpirun_signals.front().at < *facts.failure_seen)) {
    const SignalSender& sender = facts.mpirun_signals.front().sender;
    JobVerdict verdict;
    verdict.kind = JobVerdict::Kind::failed;
    verdict.exit_code = exit_code::signal_base + sender.signal;
    verdict.summary = fmt::format("mpirun received {}, a stop the job did not ask for: it ended the ranks and {}.",
                                  describe_signal(sender), mpirun_ending(facts));
    verdict.details.push_back("A job is stopped by a signal to train, the container's first process (SageMaker's "
                              "StopTrainingJob), never by one to mpirun.");
    return verdict;
  }
  if (facts.mpirun_status && WIFEXITED(*facts.mpirun_status) && WEXITSTATUS(*facts.mpirun_status) == 0) {
    JobVerdict verdict;
    verdict.kind = JobVerdict::Kind::succeeded;
    verdict.exit_code = exit_code::success;
    verdict.summary = fmt::format("all {} ranks finished successfully", job.world_size());
    return verdict;
  }
  JobVerdict verdict;
  if (auto failure = first_failure(facts)) {
    verdict = rank_failed(job, facts, *failure, mpirun_code);
  } else if (facts.ranks_never_started_after) {
    verdict.exit_code = exit_code::timed_out;
    verdict.summary = fmt::format("No rank started within {} s of mpirun's start (TRAIN_RANKS_TIMEOUT_SECONDS): train "
                                  "ended mpirun, which then {}.",
                                  facts.ranks_never_started_after->count(), mpirun_ending(facts));
    verdict.details = mpirun_own_words(facts);
    verdict.details.push_back("mpirun's own words, if it said any, are above; raise TRAIN_RANKS_TIMEOUT_SECONDS if "
                              "the ranks of a large job start slowly.");
  } else if (!facts.mpirun_messages.usage_error().empty()) {
    verdict = mpirun_refused(job, facts);
  } else if (!facts.companion_trouble.empty()) {
    verdict.exit_code = mpirun_code;
    verdict.summary = facts.companion_trouble;
    verdict.details.push_back(fmt::format("mpirun {} before any rank reported a failure.", mpirun_ending(facts)));
    const auto own = mpirun_own_words(facts);
    verdict.details.insert(verdict.details.end(), own.begin(), own.end());
  } else {
    verdict.exit_code = mpirun_code;
    verdict.summary = fmt::format("mpirun {} before any rank reported a failure.", mpirun_ending(facts));
    // A lost host is the cause: it goes on the first line, which the failure file's length limit never cuts
    // (mpirun's own lines below, which the ranks' complaints about the vanished peer lengthen, are cut from
    // their start).
    if (const auto& lost = facts.mpirun_messages.lost_daemon_sentence(); !lost.empty()) {
      verdict.summary += " " + lost + ".";
    }
    verdict.details = facts.mpirun_messages.own_error_lines();
  }
  verdict.kind = JobVerdict::Kind::failed;
  // Never 0 for a failed job: SageMaker would take it for a success.
  if (verdict.exit_code == 0) verdict.exit_code = exit_code::internal_error;
  return verdict;
}

JobVerdict success_file_unwritable(const JobPaths& paths) {
  JobVerdict verdict;
  verdict.kind = JobVerdict::Kind::failed;
  verdict.exit_code = exit_code::environment;
  verdict.summary = fmt::format("Training finished, but train could not write {}.", paths.success_file().string());
  return verdict;
}

}  // namespace train
