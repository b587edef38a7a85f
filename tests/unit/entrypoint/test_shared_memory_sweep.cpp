// What killed jobs leave: Open MPI's session folders (issue 31: a killed mpirun left $TMPDIR/ompi.HOST.UID/pid.N).
#include "entrypoint/shared_memory_sweep.h"
#include "job/cluster.h"
#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace train;
using train::testing::TempFolder;

namespace {

// A pid no process has: a child's, once it is reaped.
pid_t ended_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

void age(const std::filesystem::path& path, std::chrono::seconds by) {
  const auto when = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() - by);
  timespec times[2] = {{when, 0}, {when, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

}  // namespace

TEST_CASE("shared memory sweep: mpirun's session folders whose mpirun is gone, and nothing else",
          "[shared_memory_sweep]") {
  TempFolder shm("train-sweep-shm");  // empty: only the session folders are looked at here
  TempFolder temporary("train-sweep-tmp");
  const auto top = temporary.path() / ("ompi." + local_host_name() + "." + std::to_string(::getuid()));
  const std::string gone = "pid." + std::to_string(ended_pid());
  const std::string live = "pid." + std::to_string(::getpid());
  for (const std::string name : {gone, live, std::string("jf.4711"), std::string("notes"), std::string("pid.12x")}) {
    std::filesystem::create_directories(top / name / "0");
    std::ofstream(top / name / "contact.txt") << "x";
    age(top / name, std::chrono::hours(1));
  }
  const std::string young = "pid." + std::to_string(ended_pid());
  std::filesystem::create_directories(top / young);  // a starting job's, perhaps: spared for a minute
  // Another host's folder (a simulated host of the same machine) and another user's name are not looked into.
  const auto other_host = temporary.path() / ("ompi.elsewhere." + std::to_string(::getuid())) / gone;
  std::filesystem::create_directories(other_host);
  age(other_host, std::chrono::hours(1));

  const auto removed = remove_stale_shared_memory(shm.path(), std::chrono::seconds(60), temporary.path());
  CHECK(removed == std::vector<std::filesystem::path>{top / gone});
  // A worker daemon's jf.N says nothing of whether it runs: kept, as is what Open MPI does not name.
  CHECK(temporary.entries(top.filename()) == std::set<std::string>{live, "jf.4711", "notes", "pid.12x", young});
  CHECK(std::filesystem::exists(other_host));
  CHECK(remove_stale_shared_memory(shm.path(), std::chrono::seconds(60), temporary.path() / "absent").empty());
}
