// The witness's record of signals sent to mpirun itself, read back; the launcher's own are left out.
#include "entrypoint/mpirun_signals.h"
#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>

using namespace train;

TEST_CASE("mpirun signals: the witness's lines, in order, without the launcher's own", "[mpirun_signals]") {
  testing::TempFolder folder("train-mpirun-signals-test");
  const auto file = folder.path() / "mpirun-signals";
  CHECK(read_mpirun_signals(file, 100).empty());  // no file: none
  std::ofstream(file) << "signal=15 pid=100 uid=0 code=0 monotonic_ns=5000000000 command=train\n"
                         "signal=2 pid=4321 uid=1000 code=0 monotonic_ns=6000000000 command=kill me\n"
                         "half a line\n"
                         "signal=1 pid=0 uid=0 code=128 monotonic_ns=7000000000 command=\n";
  const auto signals = read_mpirun_signals(file, 100);
  REQUIRE(signals.size() == 2);
  CHECK(signals[0].sender.signal == SIGINT);
  CHECK(signals[0].sender.pid == 4321);
  CHECK(signals[0].sender.uid == 1000);
  CHECK(signals[0].sender.command == "kill me");
  CHECK_FALSE(signals[0].sender.from_kernel);
  CHECK(signals[0].at.time_since_epoch() == std::chrono::seconds(6));
  CHECK(signals[1].sender.from_kernel);  // SI_KERNEL
  CHECK(describe_signal(signals[1].sender) == "SIGHUP from the kernel");
}

TEST_CASE("mpirun signals: the witness goes ahead of the job's own LD_PRELOAD, which it gets back",
          "[mpirun_signals]") {
  testing::TempFolder folder("train-mpirun-signals-test");
  const auto library = folder.path() / "libtrain_signal_witness.so";
  const auto file = folder.path() / "mpirun-signals";
  const EnvironmentMap given{{"LD_PRELOAD", "/opt/mine.so"}, {"OTHER", "1"}};
  CHECK(with_signal_witness(given, file, library) == given);  // no library there: nothing changes
  std::ofstream(library) << "";
  const auto environment = with_signal_witness(given, file, library);
  CHECK(environment.at("LD_PRELOAD") == library.string() + ":/opt/mine.so");
  CHECK(environment.at("TRAIN_SIGNAL_WITNESS_PRELOAD") == "/opt/mine.so");
  CHECK(environment.at("TRAIN_SIGNAL_WITNESS") == file.string());
  CHECK(environment.at("OTHER") == "1");
  const auto without = with_signal_witness({}, file, library);
  CHECK(without.at("LD_PRELOAD") == library.string());
  CHECK(without.at("TRAIN_SIGNAL_WITNESS_PRELOAD").empty());
}
