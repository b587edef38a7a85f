#include "job/torchrun_environment.h"

#include "common/config_error.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace train {

namespace {

// A TCP port nobody listens on now: bind to port 0 and read what the kernel gave (torchrun's
// _get_socket_with_port does the same). Closed again at once; the master rank binds it moments later.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket() for a free port failed: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) throw std::runtime_error(std::string("no free TCP port on this host: ") + std::strerror(saved));
  return ntohs(address.sin_port);
}

}  // namespace

int choose_master_port(const EnvironmentMap& launcher_environment) {
  if (auto port = whole_number_from_environment(launcher_environment, "MASTER_PORT", 1, 65535,
                                                "a TCP port from 1 to 65535 (or unset: train picks a free one)")) {
    return static_cast<int>(*port);
  }
  return free_port();
}

EnvironmentMap torchrun_variables(const JobDescription& job, const RankIdentity& identity,
                                  const EnvironmentMap& environment) {
  const int local_size = identity.local_size > 0 ? identity.local_size : 1;
  const int hosts = (identity.size + local_size - 1) / local_size;
  const std::string port = lookup(environment, master_port_variable).value_or(std::to_string(torchrun_default_port));
  EnvironmentMap variables = {
      {"RANK", std::to_string(identity.rank)},
      {"WORLD_SIZE", std::to_string(identity.size)},
      {"LOCAL_RANK", std::to_string(identity.local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(local_size)},
      {"GROUP_RANK", std::to_string(identity.rank / local_size)},
      {"GROUP_WORLD_SIZE", std::to_string(hosts)},
      // One role ("default", torchrun's --role) holds every worker: its ranks are the global ones.
      {"ROLE_RANK", std::to_string(identity.rank)},
      {"ROLE_WORLD_SIZE", std::to_string(identity.size)},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", job.cluster.single_host() ? std::string("localhost") : job.cluster.master_host},
      {"MASTER_PORT", port},
      // No restarts: a failed rank fails the job (torchrun's default --max_restarts=0).
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"TORCHELASTIC_RUN_ID", "none"},  // torchrun's default --rdzv_id
      // No agent holds a store: rank 0's init_process_group() creates it on MASTER_PORT (torchrun's static
      // rendezvous says True, as its agent's store already listens there).
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
  };
  for (const char* name : {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"}) {
    variables[name] = lookup(environment, name).value_or("1");
  }
  return variables;
}

}  // namespace train
