// Which rank failed, and how, from what mpirun (Open MPI 4.1) prints and from rank-exec's own report line.
// The message texts are copied from real mpirun 4.1.4 runs on this machine.
#include "entrypoint/mpirun_outcome.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <optional>
#include <string>
#include <sys/wait.h>
#include <vector>

using namespace train;

namespace {

MpirunMessages observe_all(const std::vector<std::string>& lines) {
  MpirunMessages messages;
  for (const auto& line : lines) messages.observe(line);
  return messages;
}

const std::string rule = "--------------------------------------------------------------------------";

// What mpirun prints when a rank ends with a failure, then `block` (its account of the first one) in rules.
MpirunMessages observe_aborted_job(const std::vector<std::string>& block) {
  std::vector<std::string> lines = {rule,
                                    "Primary job  terminated normally, but 1 process returned",
                                    "a non-zero exit code. Per user-direction, the job has been aborted.",
                                    rule,
                                    rule};
  lines.insert(lines.end(), block.begin(), block.end());
  lines.push_back(rule);
  return observe_all(lines);
}

// Wait statuses as waitpid() reports them.
int exited(int code) { return code << 8; }
int killed(int sig) { return sig; }

// `failure` is there and is exactly `expected` (rank, exit code or signal, node), which stands for `code`.
void require_failure(const std::optional<RankFailure>& failure, const RankFailure& expected, int code) {
  REQUIRE(failure);
  CHECK(failure->rank == expected.rank);
  CHECK(failure->exit_code == expected.exit_code);
  CHECK(failure->signal == expected.signal);
  CHECK(failure->node == expected.node);
  CHECK(failure->code() == code);
}

}  // namespace

TEST_CASE("mpirun outcome: a rank killed by a signal", "[mpirun]") {
  auto messages =
      observe_aborted_job({"mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."});
  require_failure(messages.first_failure(), {.rank = 1, .signal = 9, .node = "vm"}, 137);
}

TEST_CASE("mpirun outcome: a rank that exited with a code (the Process name / Exit code block)", "[mpirun]") {
  auto messages = observe_aborted_job({
      "mpirun detected that one or more processes exited with non-zero status, thus causing",
      "the job to be terminated. The first process to do so was:",
      "",
      "  Process name: [[26584,1],1]",
      "  Exit code:    3",
  });
  require_failure(messages.first_failure(), {.rank = 1, .exit_code = 3}, 3);
}

TEST_CASE("mpirun outcome: MPI_Abort names the rank and its error code", "[mpirun]") {
  auto messages = observe_all({
      rule,
      "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD",
      "with errorcode 70.",
      "",
      "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
      "You may or may not see output from other processes, depending on",
      "exactly when Open MPI kills them.",
      rule,
  });
  auto failure = messages.first_failure();
  REQUIRE(failure);
  CHECK(failure->rank == 2);
  CHECK(failure->exit_code == 70);
  CHECK(failure->code() == 70);
}

TEST_CASE("mpirun outcome: only the first failure counts", "[mpirun]") {
  auto messages = observe_all({
      "mpirun noticed that process rank 3 with PID 0 on node algo-2 exited on signal 6 (Aborted).",
      "mpirun noticed that process rank 0 with PID 0 on node algo-1 exited on signal 9 (Killed).",
      "  Process name: [[1,1],2]",
      "  Exit code:    4",
  });
  auto failure = messages.first_failure();
  REQUIRE(failure);
  CHECK(failure->rank == 3);
  CHECK(failure->signal == 6);
  CHECK(failure->node == "algo-2");
}

TEST_CASE("mpirun outcome: an Exit code line without a Process name before it is not a failure", "[mpirun]") {
  auto messages = observe_all({"  Exit code:    3"});
  CHECK_FALSE(messages.first_failure());
}

TEST_CASE("mpirun outcome: mpirun's own error lines are kept, without rules and blank lines", "[mpirun]") {
  auto messages = observe_all({
      rule,
      "There are not enough slots available in the system to satisfy the 8",
      "slots that were requested by the application:",
      "",
      "  /usr/local/bin/train",
      rule,
  });
  CHECK_FALSE(messages.first_failure());
  REQUIRE(messages.own_error_lines() ==
          std::vector<std::string>{"There are not enough slots available in the system to satisfy the 8",
                                   "slots that were requested by the application:", "  /usr/local/bin/train"});
}

TEST_CASE("mpirun outcome: a lost remote daemon (exit code 205) is said first, naming its host", "[mpirun]") {
  // Issue 31: what mpirun 4.1.4 printed on algo-1, exiting with 205 (Open MPI's ORTE_ERR_COMM_FAILURE, -51),
  // when every process of the worker algo-2 was killed mid-training (tests/cluster: a worker host dies).
  auto messages = observe_all({
      rule,
      "ORTE has lost communication with a remote daemon.",
      "",
      "  HNP daemon   : [[42303,0],0] on node algo-1",
      "  Remote daemon: [[42303,0],1] on node algo-2",
      "",
      "This is usually due to either a failure of the TCP network",
      "connection to the node, or possibly an internal failure of",
      "the daemon itself. We cannot recover from this failure, and",
      "therefore will terminate the job.",
      rule,
  });
  CHECK_FALSE(messages.first_failure());
  CHECK(messages.lost_daemon_sentence() ==
        "mpirun lost its daemon on host algo-2: that host died, or the network between it and this host failed, "
        "or its daemon was killed (mpirun then exits with 205: Open MPI's communication failure, not a signal); "
        "that host's own log and failure file say more if it still runs");
  REQUIRE(messages.own_error_lines().size() == 7);
  CHECK(messages.own_error_lines()[0] == "ORTE has lost communication with a remote daemon.");
  // Without the remote daemon's line, nothing is said.
  CHECK(observe_all({"ORTE has lost communication with a remote daemon."}).lost_daemon_sentence().empty());
}

TEST_CASE("mpirun outcome: mpirun's own usage errors are recognised and name what it refused", "[mpirun]") {
  CHECK(observe_all({"mpirun: Error: unknown option \"--bogus-option\"", "Type 'mpirun --help' for usage."})
            .usage_error() == "mpirun does not know the option \"--bogus-option\"");
  CHECK(observe_all({rule, "The specified mapping policy is not recognized:", "", "  Policy: bogus", "",
                     "Please check for a typo or ensure that the option is a supported", "one.", rule})
            .usage_error() == "mpirun does not know the mapping policy \"bogus\"");
  CHECK(observe_all({rule, "The specified binding policy is not recognized:", "", "  Policy: nothing"}).usage_error() ==
        "mpirun does not know the binding policy \"nothing\"");
  CHECK_THAT(observe_all({rule, "mpirun was unable to find the specified executable file, and therefore",
                          "did not launch the job.  This error was first reported for process", "",
                          "Node:       vm", "Executable: rank", rule})
                 .usage_error(),
             Catch::StartsWith("mpirun found no program \"rank\" to run (an option before it may lack its value"));
  // A rank's failure or mpirun's other complaints are not usage errors.
  CHECK(observe_all({"mpirun noticed that process rank 1 with PID 0 on node algo-2 exited on signal 9 (Killed).",
                     "There are not enough slots available in the system to satisfy the 8", "  Policy: bogus"})
            .usage_error()
            .empty());
}

TEST_CASE("rank end report: the line rank-exec writes parses back to the same failure", "[mpirun]") {
  CHECK(rank_end_report(1, "python3", exited(3)) == "[train] rank 1: command `python3` exited with code 3");
  CHECK(rank_end_report(2, "sh", killed(SIGKILL)) == "[train] rank 2: command `sh` was killed by signal 9 (SIGKILL)");

  // A rank's own report names no node.
  require_failure(parse_rank_end_report(rank_end_report(1, "python3", exited(3))), {.rank = 1, .exit_code = 3}, 3);
  require_failure(parse_rank_end_report(rank_end_report(12, "my prog`name", killed(SIGSEGV))),
                  {.rank = 12, .signal = SIGSEGV}, 128 + SIGSEGV);
}

TEST_CASE("rank end report: other lines are not reports", "[mpirun]") {
  for (const char* line : {"", "Traceback (most recent call last):",
                           "[train] error: rank 1: cannot run nope: No such file or directory",
                           "x [train] rank 1: command `sh` exited with code 3",
                           "[train] rank 1: command `sh` exited with code 3 and more",
                           "[train] rank one: command `sh` exited with code 3"}) {
    INFO("line: " << line);
    CHECK_FALSE(parse_rank_end_report(line));
  }
}

TEST_CASE("rank end report: the launcher takes the first rank's own report, and only from that rank", "[mpirun]") {
  MpirunMessages messages;
  // A rank cannot speak for another: the tag says who wrote the line.
  CHECK_FALSE(messages.observe_rank_line(0, "[train] rank 3: command `sh` exited with code 9"));
  CHECK_FALSE(messages.observe_rank_line(0, "plain error output"));
  CHECK_FALSE(messages.first_failure());
  CHECK(messages.observe_rank_line(1, "[train] rank 1: command `sh` exited with code 3"));
  // Ranks that mpirun ended after the first failure report too; they do not replace it.
  CHECK(messages.observe_rank_line(0, "[train] rank 0: command `sh` was killed by signal 15 (SIGTERM)"));
  auto failure = messages.first_failure();
  REQUIRE(failure);
  CHECK(failure->rank == 1);
  CHECK(failure->exit_code == 3);
}

TEST_CASE("rank end report: mpirun's own account of the first failure takes precedence", "[mpirun]") {
  // rank-exec itself was killed (no report of its own); the ranks mpirun then ended reported SIGTERM.
  MpirunMessages messages;
  messages.observe_rank_line(0, "[train] rank 0: command `sh` was killed by signal 15 (SIGTERM)");
  messages.observe("mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 9 (Killed).");
  auto failure = messages.first_failure();
  REQUIRE(failure);
  CHECK(failure->rank == 2);
  CHECK(failure->signal == 9);
}
