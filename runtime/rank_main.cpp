#include "runtime/rank_main.h"

#include "common/config_error.h"
#include "common/environment_error.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/train_variables.h"
#include "common/memory_facts.h"
#include "job/host_agreement.h"
#include "job/job_description.h"
#include "job/rank_environment.h"
#include "job/rank_mark.h"
#include "job/rank_reason.h"
#include "job/train_start.h"
#include "kernels/ops.h"
#include "runtime/comm/broadcast_text.h"
#include "runtime/comm/gather_text.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/data/data_error.h"
#include "runtime/device_pinning.h"
#include "runtime/startup_phases.h"
#include "runtime/stop_request.h"
#include "runtime/trainer.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <new>
#include <optional>
#include <system_error>

namespace train {

namespace {

// Local rank and size: Open MPI's variables when present, else a shared-memory split of the world.
RankIdentity discover_identity() {
  RankIdentity identity;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &identity.rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &identity.size));
  if (auto from_env = rank_identity_from_environment(current_environment());
      from_env && from_env->rank == identity.rank && from_env->size == identity.size) {
    return *from_env;
  }
  MPI_Comm host_comm;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, identity.rank, MPI_INFO_NULL, &host_comm));
  MPI_CHECK(MPI_Comm_rank(host_comm, &identity.local_rank));
  MPI_CHECK(MPI_Comm_size(host_comm, &identity.local_size));
  MPI_CHECK(MPI_Comm_free(&host_comm));
  return identity;
}

// TRAIN_RANKS_SHARE_GPUS=1 with more ranks than GPUs: NCCL refuses two ranks on one GPU of one host, so each
// rank gets a host id of its own (NCCL_HOSTID) and NCCL's socket transport (the path of hosts without EFA),
// unless the environment chose one. Set before NCCL starts, which reads them once.
void look_like_a_host_of_its_own(const RankIdentity& identity, const std::string& host) {
  const std::string id = fmt::format("{}-rank-{}", host, identity.rank);
  ::setenv("NCCL_HOSTID", id.c_str(), 1);
  ::setenv("NCCL_NET", "Socket", 0);
  if (identity.local_rank == 0) {
    write_line(1, fmt::format("TRAIN_RANKS_SHARE_GPUS=1: {} ranks share the GPUs of host {}; NCCL sees each rank as "
                              "a host of its own ({} transport)",
                              identity.local_size, host, std::getenv("NCCL_NET")));
  }
}

// Every rank contributes rank+1; the sum must be size*(size+1)/2 everywhere.
void check_allreduce(const RankIdentity& identity) {
  long long contribution = identity.rank + 1;
  long long sum = 0;
  MPI_CHECK(MPI_Allreduce(&contribution, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
  long long expected = static_cast<long long>(identity.size) * (identity.size + 1) / 2;
  if (sum != expected) {
    throw comm::MpiError(fmt::format("rank {}: allreduce check failed: the sum of 1..{} came back as {}, expected {}",
                                     identity.rank, identity.size, sum, expected));
  }
  if (identity.rank == 0) {
    write_line(1, fmt::format("allreduce check passed: {} ranks summed to {}", identity.size, sum));
  }
}

// Every host's job description against the master's (job/host_agreement.h), before the first step. The first
// difference any rank found (by rank) is every rank's answer, so that rank 0, on the master's host, leaves it
// where the launcher reads it: a rank on another host could only say it through mpirun's relay.
std::optional<std::string> job_disagreement(const JobDescription& job) {
  const EnvironmentMap environment = current_environment();
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      read_seconds_variable(environment, IntegerVariable::step_timeout_seconds));
  const std::string mine = host_disagreement(job, environment, {}).value_or("");
  std::string first;
  for (const auto& text : comm::gather_texts(mine, MPI_COMM_WORLD, timeout, "the job descriptions' comparison")) {
    if (!text.empty()) {
      first = text;
      break;
    }
  }
  comm::broadcast_text(first, MPI_COMM_WORLD);
  if (first.empty()) return std::nullopt;
  return first;
}

int run_rank_checked() {
  rank_startup_phases().done(StartupPhase::launch);
  install_stop_handlers();
  // A write past the file-size limit (RLIMIT_FSIZE) fails with EFBIG, which names the file and leaves no
  // temporary file behind, instead of killing the rank with SIGXFSZ (exit 153) in the middle of it.
  ::signal(SIGXFSZ, SIG_IGN);
  MPI_CHECK(MPI_Init(nullptr, nullptr));
  rank_startup_phases().done(StartupPhase::mpi_init);
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  RankIdentity identity = discover_identity();

  JobDescription job = load_job_description(JobPaths::from_environment(), current_environment(),
                                            detect_host_resources(), CheckMode::this_host);
  set_current_host_of_rank(job, identity);
  rank_startup_phases().set_origin(
      train_start_of_this_host(current_environment(), !job.cluster.single_host() && !job.cluster.is_master()));
  if (!job.cluster.single_host()) mark_rank_started();
  for (auto& [name, value] : rank_program_environment(job, current_environment(), identity)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  // OpenMP read OMP_NUM_THREADS when this process started, before the rank knew its share of the cores:
  // without this every rank would run as many threads as the host has cores.
  kernels::set_cpu_threads(threads_per_rank(job, identity, current_environment()));

  std::string device;
  if (job.device == Device::cuda) {
    // The launcher refuses processes_per_host above the GPU count; custom_mpi_options can still place more.
    if (identity.local_size > job.resources.gpus) {
      if (!job.ranks_share_gpus) {
        throw ConfigError(fmt::format("rank {}: host {} runs {} ranks but has {} GPU{}; each rank needs its own: "
                                      "set processes_per_host to at most {} (or leave it out: one rank per GPU)",
                                      identity.rank, job.cluster.current_host, identity.local_size,
                                      job.resources.gpus, job.resources.gpus == 1 ? "" : "s", job.resources.gpus));
      }
      look_like_a_host_of_its_own(identity, job.cluster.current_host);
    }
    device = pin_gpu(identity.local_rank % std::max(1, job.resources.gpus));
    use_pinned_host_memory();
  } else {
    const int threads = kernels::cpu_threads();  // OpenMP's own count: what the ops will use
    device = fmt::format("cpu ({} thread{})", threads, threads == 1 ? "" : "s");
  }
  write_line(1, fmt::format("rank {} of {} (local rank {} of {}) on host {}: device {}", identity.rank, identity.size,
                            identity.local_rank, identity.local_size, job.cluster.current_host, device));
  check_allreduce(identity);
  if (auto disagreement = job_disagreement(job)) {
    // Rank 0, on the master's host, fails the job with the reason; the others end quietly, so that mpirun
    // names rank 0, whose reason the launcher has, and not a rank of a host whose reason it cannot read.
    MPI_CHECK(MPI_Finalize());
    if (identity.rank != 0) return exit_code::success;
    write_rank_reason(identity.rank, exit_code::invalid_job, 0, *disagreement, RankReasonKind::headline);
    log_error("{}", *disagreement);
    return exit_code::invalid_job;
  }
  rank_startup_phases().done(StartupPhase::job_checks);
  write_rank_started(identity.rank);  // every rank has joined: the launcher's start-up wait is over
  int code = Trainer(job, identity, MPI_COMM_WORLD).run();
  MPI_CHECK(MPI_Finalize());
  return code;
}

// Other ranks may be blocked in a collective with this one: abort the whole job rather than hang it. The
// reason goes first to the launcher's folder (job/rank_reason.h), then to the log: an abort may end mpirun
// before it relays the log line.
int fail_rank(int code, const std::string& message) {
  const auto identity = rank_identity_from_environment(current_environment());
  write_rank_reason(identity ? identity->rank : -1, code, 0, message);
  log_error("{}", message);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  return code;
}

}  // namespace

int run_rank() {
  try {
    return run_rank_checked();
  } catch (const ConfigError& error) {
    return fail_rank(exit_code::invalid_job, error.what());
  } catch (const data::DataTimeout& error) {
    return fail_rank(exit_code::timed_out, error.what());
  } catch (const data::DataError& error) {
    return fail_rank(exit_code::invalid_job, error.what());
  } catch (const comm::CollectiveTimeout& error) {
    return fail_rank(exit_code::timed_out, error.what());
  } catch (const EnvironmentError& error) {
    return fail_rank(exit_code::environment, error.what());
  } catch (const std::system_error& error) {
    // std::filesystem's errors: a full or read-only disk is the machine's fault, anything else ours.
    const bool machine = error.code().category() == std::generic_category() ||
                         error.code().category() == std::system_category();
    if (machine && is_environment_errno(error.code().value())) {
      return fail_rank(exit_code::environment, machine_fault_message(error.what(), error.code().value()));
    }
    return fail_rank(exit_code::internal_error, error.what());
  } catch (const std::bad_alloc&) {
    // The job asks for more memory than the host has (a batch, an input size, ranks per host): the job's
    // fault, like a batch larger than a GPU holds.
    return fail_rank(exit_code::invalid_job,
                     fmt::format("out of memory: an allocation failed (std::bad_alloc) after this rank's memory had "
                                 "peaked at {} ({}); lower mini_batch_size or image_shape, run fewer ranks per host "
                                 "(processes_per_host), or use an instance with more memory",
                                 memory_text(own_peak_memory_bytes()), host_memory_text()));
  } catch (const std::exception& error) {
    return fail_rank(exit_code::internal_error, error.what());
  }
}

}  // namespace train
