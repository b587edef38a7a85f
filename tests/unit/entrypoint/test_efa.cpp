// EFA: the host's devices found in a made-up /sys and /dev, and what the launcher sets or says.
#include "entrypoint/efa.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

using namespace train;
using train::testing::TempJobDir;

namespace {

// A p4d-like host: two EFA devices, one InfiniBand device of another driver, the uverbs device files.
void make_host(const TempJobDir& dir, bool device_files) {
  for (const char* name : {"rdmap16s27", "rdmap32s27"}) {
    dir.write(std::string("drivers/efa/.keep"), "");
    std::filesystem::create_directories(dir.root() / "sys/class/infiniband" / name / "device");
    std::filesystem::create_directory_symlink(dir.root() / "drivers/efa",
                                              dir.root() / "sys/class/infiniband" / name / "device" / "driver");
  }
  std::filesystem::create_directories(dir.root() / "sys/class/infiniband/mlx5_0/device");
  dir.write("drivers/mlx5_core/.keep", "");
  std::filesystem::create_directory_symlink(dir.root() / "drivers/mlx5_core",
                                            dir.root() / "sys/class/infiniband/mlx5_0/device/driver");
  if (device_files) {
    dir.write("dev/infiniband/uverbs0", "");
    dir.write("dev/infiniband/uverbs1", "");
    dir.write("dev/infiniband/rdma_cm", "");
  }
}

JobDescription gpu_job(std::vector<std::string> hosts, const std::string& instance_type) {
  JobDescription job;
  job.device = Device::cuda;
  job.cluster.hosts = hosts;
  job.cluster.all_hosts = hosts;
  job.cluster.current_host = hosts.front();
  job.cluster.master_host = hosts.front();
  ResourceConfig config;
  config.current_instance_type = instance_type;
  job.resource_config = config;
  return job;
}

}  // namespace

TEST_CASE("EFA: devices bound to the efa driver, and the container's device files", "[efa]") {
  TempJobDir dir;
  make_host(dir, true);
  EfaDevices efa = find_efa_devices(dir.root());
  CHECK(efa.devices == std::vector<std::string>{"rdmap16s27", "rdmap32s27"});
  CHECK(efa.device_files == std::vector<std::string>{(dir.root() / "dev/infiniband/uverbs0").string(),
                                                     (dir.root() / "dev/infiniband/uverbs1").string()});
  TempJobDir empty;
  CHECK(find_efa_devices(empty.root()).devices.empty());
}

TEST_CASE("EFA: RDMA-capable instance types", "[efa]") {
  for (const char* type : {"ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "p5en.48xlarge", "ml.trn1.32xlarge",
                           "ml.p6e-gb200.36xlarge"}) {
    CHECK(efa_supports_rdma(type));
  }
  for (const char* type : {"ml.g5.48xlarge", "ml.p3dn.24xlarge", "ml.c5.xlarge", "local", ""}) CHECK_FALSE(efa_supports_rdma(type));
}

TEST_CASE("EFA: the variables AWS sets, or a warning that NCCL uses sockets", "[efa]") {
  TempJobDir dir;
  make_host(dir, true);
  const EfaDevices efa = find_efa_devices(dir.root());
  EnvironmentMap environment;
  auto lines = apply_efa_settings(gpu_job({"algo-1", "algo-2"}, "ml.p4d.24xlarge"), efa, environment);
  CHECK(environment == EnvironmentMap{{"FI_PROVIDER", "efa"}, {"FI_EFA_USE_DEVICE_RDMA", "1"}});
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("EFA: 2 devices (rdmap16s27, rdmap32s27);", 0) == 0);
  // The user's own value is kept; no RDMA variable where the instance has none.
  EnvironmentMap own{{"FI_PROVIDER", "efa;ofi_rxm"}};
  apply_efa_settings(gpu_job({"algo-1", "algo-2"}, "ml.g5.48xlarge"), efa, own);
  CHECK(own == EnvironmentMap{{"FI_PROVIDER", "efa;ofi_rxm"}});
  // One host, or the CPU: NCCL does not cross hosts, nothing to say.
  EnvironmentMap untouched;
  CHECK(apply_efa_settings(gpu_job({"algo-1"}, "ml.p4d.24xlarge"), efa, untouched).empty());
  JobDescription cpu = gpu_job({"algo-1", "algo-2"}, "ml.c5.xlarge");
  cpu.device = Device::cpu;
  CHECK(apply_efa_settings(cpu, efa, untouched).empty());
  CHECK(untouched.empty());
  // No EFA: sockets, with a warning.
  auto warned = apply_efa_settings(gpu_job({"algo-1", "algo-2"}, "ml.g5.12xlarge"), EfaDevices{}, untouched);
  REQUIRE(warned.size() == 1);
  CHECK(warned[0].rfind("warning: host algo-1 has no EFA device", 0) == 0);
  CHECK(warned[0].find("NCCL will use TCP sockets between hosts") != std::string::npos);
  CHECK(untouched.empty());
  // EFA on the host but not in the container (AWS Batch without the devices in the job definition).
  TempJobDir no_files;
  make_host(no_files, false);
  auto missing = apply_efa_settings(gpu_job({"algo-1", "algo-2"}, "ml.p4d.24xlarge"), find_efa_devices(no_files.root()),
                                    untouched);
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].find("the container has no /dev/infiniband/uverbs* device") != std::string::npos);
  CHECK(untouched.empty());
}
