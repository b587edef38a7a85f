#include "entrypoint/mpirun_command.h"

#include <fmt/format.h>

#include <algorithm>

namespace train {

bool is_host_specific_variable(const std::string& name) {
  static const char* const exact[] = {"HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "TERM", "DISPLAY", "SSH_CLIENT",
                                      "SSH_CONNECTION", "SSH_TTY", "SSH_AUTH_SOCK", "LS_COLORS", "CURRENT_HOST"};
  if (std::find(std::begin(exact), std::end(exact), name) != std::end(exact)) return true;
  for (const char* prefix : {"OMPI_", "PMIX_", "ORTE_", "OPAL_", "PRTE_", "SM_"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

namespace {

constexpr std::string_view mca_variable_prefix = "OMPI_MCA_";
constexpr const char* single_copy_parameter = "btl_vader_single_copy_mechanism";

bool is_identifier(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

std::string host_of_rank(const JobDescription& job, int rank) {
  if (rank < 0 || job.ranks_per_host <= 0) return "?";
  size_t index = static_cast<size_t>(rank / job.ranks_per_host);
  if (job.cluster.single_host()) return job.cluster.current_host;
  return index < job.cluster.hosts.size() ? job.cluster.hosts[index] : "?";
}

std::string hostfile_text(const std::vector<std::string>& hosts, int slots_per_host) {
  std::string text;
  for (const auto& host : hosts) text += fmt::format("{} slots={} max_slots={}\n", host, slots_per_host, slots_per_host);
  return text;
}

std::vector<std::string> build_mpirun_command(const JobDescription& job, const std::vector<std::string>& rank_program,
                                              const EnvironmentMap& environment, const std::string& mpirun,
                                              const std::string& hostfile) {
  std::vector<std::string> command = {mpirun, "--allow-run-as-root", "--tag-output", "--bind-to", "none",
                                      "--map-by", "slot", "-np", std::to_string(job.world_size())};
  std::string host_list;
  if (!hostfile.empty()) {
    command.insert(command.end(), {"--hostfile", hostfile});
  } else if (job.cluster.single_host()) {
    // Our own name may not resolve (SageMaker's "algo-1" in a local container); "localhost" always does,
    // and Open MPI starts local ranks without ssh.
    host_list = fmt::format("localhost:{}", job.ranks_per_host);
  } else {
    for (const auto& host : job.cluster.hosts) {
      host_list += fmt::format("{}{}:{}", host_list.empty() ? "" : ",", host, job.ranks_per_host);
    }
  }
  if (!host_list.empty()) command.insert(command.end(), {"--host", host_list});
  // The master starts every remote daemon itself (SageMaker's hosts cannot ssh onwards to each other).
  command.insert(command.end(), {"--mca", "plm_rsh_no_tree_spawn", "1"});
  // Open MPI's odls_base_sigkill_timeout (SIGTERM to SIGKILL when mpirun ends ranks) stays at its default
  // of 1 s: mpirun sleeps that long, blocking, every time it ends ranks (twice after a rank fails), and a
  // graceful stop does not go through it (ranks get SIGUSR2 and the launcher's own grace period).
  if (!job.cluster.single_host()) {
    const auto& interface = job.cluster.network_interface;
    command.insert(command.end(), {"--mca", "btl_tcp_if_include", interface, "--mca", "oob_tcp_if_include", interface,
                                   "-x", "NCCL_SOCKET_IFNAME=" + interface});
  }
  const CustomMpiOptions options = job.hyperparameters.mpi_options();
  // Whether the user set an MCA parameter, in the launcher's environment or the custom mpirun options: then
  // their setting stands and ours is left out.
  const auto user_sets = [&](const std::string& parameter) {
    return lookup(environment, std::string(mca_variable_prefix) + parameter).has_value() ||
           std::find(options.arguments.begin(), options.arguments.end(), parameter) != options.arguments.end();
  };
  // Open MPI's shared-memory transport copies large messages between a host's ranks with one
  // process_vm_readv (CMA), which needs ptrace rights over the other rank. Docker's default container has
  // none: every such message fails ("Read -1, expected ..., errno = 1"). Copying through the shared
  // segment instead works everywhere, as the toolkit sets it.
  if (!user_sets(single_copy_parameter)) command.insert(command.end(), {"--mca", single_copy_parameter, "none"});
  // MPI's messages go through ob1 (shared memory within a host, TCP on the job's interface between hosts; the
  // GPUs' gradients go through NCCL), as the toolkit sets it. Left to choose, every rank's MPI_Init also tries
  // the cm layer, whose PSM and PSM2 transports (Intel Omni-Path, on no AWS host) take about 0.2 s to find
  // nothing (0.24 s against 0.05 s per rank, measured here). A user who picks a pml or an mtl keeps it.
  if (!user_sets("pml") && !user_sets("mtl")) command.insert(command.end(), {"--mca", "pml", "ob1"});
  // NCCL's log level: the options' --NCCL_DEBUG, else the launcher's own NCCL_DEBUG, else INFO as the
  // toolkit sets it (the lines that show which network NCCL chose, EFA or sockets).
  const std::string nccl_debug = options.nccl_debug.value_or(lookup(environment, "NCCL_DEBUG").value_or("INFO"));
  command.insert(command.end(), {"-x", "NCCL_DEBUG=" + nccl_debug});
  for (const auto& [name, value] : environment) {
    if (is_identifier(name) && !is_host_specific_variable(name) && name != "NCCL_DEBUG") {
      command.insert(command.end(), {"-x", name});
    }
  }
  command.insert(command.end(), options.arguments.begin(), options.arguments.end());
  command.insert(command.end(), rank_program.begin(), rank_program.end());
  return command;
}

}  // namespace train
