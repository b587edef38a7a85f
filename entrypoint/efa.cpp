#include "entrypoint/efa.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace train {

EfaDevices find_efa_devices(const std::filesystem::path& root) {
  EfaDevices efa;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(root / "sys/class/infiniband", error)) {
    auto driver = std::filesystem::read_symlink(entry.path() / "device" / "driver", error);
    if (!error && driver.filename() == "efa") efa.devices.push_back(entry.path().filename().string());
  }
  error.clear();
  for (const auto& entry : std::filesystem::directory_iterator(root / "dev/infiniband", error)) {
    if (entry.path().filename().string().rfind("uverbs", 0) == 0) efa.device_files.push_back(entry.path().string());
  }
  std::sort(efa.devices.begin(), efa.devices.end());
  std::sort(efa.device_files.begin(), efa.device_files.end());
  return efa;
}

bool efa_supports_rdma(const std::string& instance_type) {
  std::string_view type = instance_type;
  if (type.rfind("ml.", 0) == 0) type.remove_prefix(3);  // SageMaker's names
  const std::string_view family = type.substr(0, type.find('.'));
  for (std::string_view prefix : {"p4d", "p5", "p6", "trn1", "trn2"}) {
    if (family.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::vector<std::string> apply_efa_settings(const JobDescription& job, const EfaDevices& efa, EnvironmentMap& environment) {
  std::vector<std::string> lines;
  if (job.device != Device::cuda || job.cluster.single_host()) return lines;  // NCCL does not leave the host
  if (efa.devices.empty()) {
    lines.push_back(fmt::format("warning: host {} has no EFA device (no /sys/class/infiniband entry with the efa "
                                "driver): NCCL will use TCP sockets between hosts, which is much slower on GPU "
                                "instances; use an EFA instance type (p4d, p5) with EFA enabled in its network",
                                job.cluster.current_host));
    return lines;
  }
  if (efa.device_files.empty()) {
    lines.push_back(fmt::format("warning: host {} has EFA ({}) but the container has no /dev/infiniband/uverbs* "
                                "device: NCCL will use TCP sockets between hosts; pass the devices to the container "
                                "(AWS Batch: linuxParameters.devices in the job definition)",
                                job.cluster.current_host, fmt::join(efa.devices, ", ")));
    return lines;
  }
  std::vector<std::string> set;
  auto set_default = [&](const std::string& name, const std::string& value) {
    if (environment.count(name) != 0) return;  // the user's own setting
    environment[name] = value;
    set.push_back(name + "=" + value);
  };
  set_default("FI_PROVIDER", "efa");
  const std::string instance_type = job.resource_config ? job.resource_config->current_instance_type : "";
  if (efa_supports_rdma(instance_type)) set_default("FI_EFA_USE_DEVICE_RDMA", "1");
  lines.push_back(fmt::format("EFA: {} device{} ({}); NCCL uses them through the aws-ofi-nccl plugin{}{} (look for "
                              "\"NET/OFI Selected provider is efa\" in the ranks' NCCL INFO lines)",
                              efa.devices.size(), efa.devices.size() == 1 ? "" : "s", fmt::join(efa.devices, ", "),
                              set.empty() ? "" : "; set ", fmt::join(set, ", ")));
  return lines;
}

}  // namespace train
