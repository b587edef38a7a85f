// torchrun's environment for every rank of a user's program (`train -- CMD` and script mode): the variables
// torch.distributed's env:// rendezvous reads (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...) and the
// others torchrun's agent gives each worker (torch/distributed/elastic/agent/server/local_elastic_agent.py,
// _start_workers), so that init_process_group() with no arguments works as under
// `torchrun --nnodes=HOSTS --nproc_per_node=RANKS --node_rank=N --master_addr=MASTER --master_port=PORT`.
// docs/environment.md lists them and where they differ from torchrun's (its agent's own store and error files).
#pragma once

#include "common/environment_map.h"
#include "job/job_description.h"
#include "job/rank_environment.h"

#include <string>

namespace train {

// The variable through which the master's launcher hands every rank the one MASTER_PORT it chose.
inline constexpr const char* master_port_variable = "TRAIN_MASTER_PORT";

// torchrun's default port (its --master_port), used when the launcher handed none.
inline constexpr int torchrun_default_port = 29500;

// The port for MASTER_PORT, chosen on the master before any rank starts: the launcher's own MASTER_PORT
// when it sets one (as torchrun's --master_port), else a port free on this host now (the kernel's choice,
// as torchrun's agent picks its own). ConfigError for a MASTER_PORT that is not a port.
int choose_master_port(const EnvironmentMap& launcher_environment);

// torchrun's variables for the rank `identity` of `job` (hosts in the host file's order: group rank = host).
// MASTER_PORT is the launcher's choice in TRAIN_MASTER_PORT. A NCCL_ASYNC_ERROR_HANDLING or
// TORCH_NCCL_ASYNC_ERROR_HANDLING already set is kept, as torchrun keeps it.
EnvironmentMap torchrun_variables(const JobDescription& job, const RankIdentity& identity,
                                  const EnvironmentMap& environment);

}  // namespace train
