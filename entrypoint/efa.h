// EFA (Elastic Fabric Adapter), the network of p4d/p5-class instances. NCCL reaches it through the
// aws-ofi-nccl plugin and libfabric's efa provider, which the CUDA image carries (docker/Dockerfile). The
// launcher looks for the host's EFA devices and sets the variables AWS's containers set; without EFA, NCCL
// uses TCP sockets between hosts, and a GPU job of several hosts says so in a warning line.
#pragma once

#include "common/environment_map.h"
#include "job/job_description.h"

#include <filesystem>
#include <string>
#include <vector>

namespace train {

struct EfaDevices {
  std::vector<std::string> devices;       // /sys/class/infiniband entries bound to the efa driver
  std::vector<std::string> device_files;  // /dev/infiniband/uverbs*: what the container may open
};

// What `root` (/ on a host; a folder in tests) shows.
EfaDevices find_efa_devices(const std::filesystem::path& root = "/");

// True for the instance types whose EFA supports RDMA reads (p4d, p4de, p5*, p6*, trn1*, trn2*), where
// libfabric before 1.18 needs FI_EFA_USE_DEVICE_RDMA=1 to use it.
bool efa_supports_rdma(const std::string& instance_type);

// For a job whose ranks use NCCL across hosts (device cuda, more than one training host): with usable EFA
// devices, FI_PROVIDER=efa and (where supported) FI_EFA_USE_DEVICE_RDMA=1 go into `environment`, which
// mpirun exports to the ranks (a value already there is the user's and kept); otherwise a warning says
// that NCCL will use sockets, and why. Returns the lines to log.
std::vector<std::string> apply_efa_settings(const JobDescription& job, const EfaDevices& efa, EnvironmentMap& environment);

}  // namespace train
