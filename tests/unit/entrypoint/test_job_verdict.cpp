// The job's report, case by case: which rank failed first and how, a stop, mpirun's own failure, the sshd's
// death, success; the exit code and the failure file's lines that go with each. mpirun's lines are Open MPI
// 4.1's words (as in test_mpirun_outcome.cpp), fed through the same MpirunMessages the launcher uses.
#include "entrypoint/job_verdict.h"

#include "common/exit_codes.h"
#include "entrypoint/job_report.h"
#include "job/hyperparameters.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <string>
#include <vector>

using namespace train;
using Catch::Contains;
using Catch::StartsWith;
using Lines = std::vector<std::string>;

namespace {

// Wait statuses as waitpid() reports them.
int exited(int code) { return code << 8; }
int killed(int sig) { return sig; }

using Time = std::chrono::steady_clock::time_point;
Time at_second(int s) { return Time{} + std::chrono::seconds(s); }

JobDescription job_on(std::vector<std::string> hosts, int ranks_per_host, Workload workload = Workload::train_resnet,
                      nlohmann::json hyperparameters = nlohmann::json::object()) {
  JobDescription job;
  job.cluster.platform = JobPlatform::sagemaker;
  job.cluster.hosts = std::move(hosts);
  job.cluster.current_host = job.cluster.hosts.front();
  job.cluster.master_host = job.cluster.hosts.front();
  job.ranks_per_host = ranks_per_host;
  job.workload = workload;
  job.outputs.checkpoints = "/opt/ml/checkpoints";
  job.hyperparameters = parse_hyperparameters(hyperparameters, "hyperparameters.json", workload);
  return job;
}

const JobDescription one_host = job_on({"algo-1"}, 4);

const std::string rule = "--------------------------------------------------------------------------";

// mpirun's block naming a rank that exited with a code.
Lines exit_code_block(int rank, int code) {
  return {rule,
          "mpirun detected that one or more processes exited with non-zero status, thus causing",
          "the job to be terminated. The first process to do so was:",
          "",
          "  Process name: [[26584,1]," + std::to_string(rank) + "]",
          "  Exit code:    " + std::to_string(code),
          rule};
}

void mpirun_said(JobEndFacts& facts, const Lines& lines) {
  for (const auto& line : lines) facts.mpirun_messages.observe(line);
}

RankReason reason(int rank, int exit_code, int64_t written_ns, Lines lines, int signal = 0) {
  return RankReason{rank, exit_code, signal, written_ns, std::move(lines)};
}

JobEndFacts failed_with(int mpirun_status) {
  JobEndFacts facts;
  facts.mpirun_status = mpirun_status;
  facts.host_memory = "this host has 16.0 GiB of memory";
  return facts;
}

}  // namespace

TEST_CASE("job verdict: every rank finished, output/success and exit 0", "[verdict]") {
  auto verdict = decide_job_verdict(one_host, failed_with(exited(0)));
  CHECK(verdict.kind == JobVerdict::Kind::succeeded);
  CHECK(verdict.exit_code == exit_code::success);
  CHECK(verdict.summary == "all 4 ranks finished successfully");
  CHECK(verdict.details.empty());
}

TEST_CASE("job verdict: success without output/success is a failure of the environment", "[verdict]") {
  JobPaths paths;
  auto verdict = success_file_unwritable(paths);
  CHECK(verdict.kind == JobVerdict::Kind::failed);
  CHECK(verdict.exit_code == exit_code::environment);
  CHECK(verdict.summary == "Training finished, but train could not write " + paths.success_file().string() + ".");
}

TEST_CASE("job verdict: a rank's own code and reason", "[verdict]") {
  JobEndFacts facts = failed_with(exited(3));
  mpirun_said(facts, exit_code_block(1, 3));
  facts.error_tails[1] = {"loading batch 7", "[train] error: image 12 of train/part-0.rec is truncated"};
  facts.error_tails[0] = {"something rank 0 said"};
  facts.reasons = {reason(1, 3, 100, {"image 12 of train/part-0.rec is truncated", "re-create the record file"})};
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.kind == JobVerdict::Kind::failed);
  CHECK(verdict.exit_code == 3);
  CHECK(verdict.summary == "Rank 1 of 4 on host algo-1 exited with code 3.");
  // The reason's first line was relayed already: it is not repeated, and neither are its further lines.
  CHECK(verdict.details == Lines{"loading batch 7", "[train] error: image 12 of train/part-0.rec is truncated"});

  SECTION("when mpirun did not relay the reason, the reason file gives it") {
    facts.error_tails.erase(1);
    auto from_file = decide_job_verdict(one_host, facts);
    CHECK(from_file.summary == "Rank 1 of 4 on host algo-1 exited with code 3.");
    CHECK(from_file.details ==
          Lines{"[train] error: image 12 of train/part-0.rec is truncated", "re-create the record file"});
  }
  SECTION("when neither mpirun nor rank-exec named it, the reason file alone names the rank and its code") {
    JobEndFacts only_file = failed_with(exited(1));
    only_file.reasons = facts.reasons;
    auto from_file = decide_job_verdict(one_host, only_file);
    CHECK(from_file.summary == "Rank 1 of 4 on host algo-1 exited with code 3.");
    CHECK(from_file.exit_code == 3);
  }
}

TEST_CASE("job verdict: a user command's rank named by rank-exec's own line", "[verdict]") {
  const auto job = job_on({"algo-1"}, 2, Workload::user_command);
  JobEndFacts facts = failed_with(exited(1));
  // Open MPI printed no block for it (the command failed before MPI_Init); rank-exec's line names it.
  REQUIRE(facts.mpirun_messages.observe_rank_line(1, "[train] rank 1: command `python3` exited with code 2"));
  facts.error_tails[1] = {"Traceback (most recent call last):", "ValueError: no data"};
  auto verdict = decide_job_verdict(job, facts);
  CHECK(verdict.summary == "Rank 1 of 2 on host algo-1 exited with code 2.");
  CHECK(verdict.exit_code == 2);
  CHECK(verdict.details == Lines{"Traceback (most recent call last):", "ValueError: no data"});
}

TEST_CASE("job verdict: a rank killed by a signal", "[verdict]") {
  JobEndFacts facts = failed_with(exited(139));
  mpirun_said(facts, {"mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 11 (Segmentation "
                      "fault)."});
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.summary == "Rank 2 of 4 on host algo-1 was killed by signal 11 (SIGSEGV).");
  CHECK(verdict.exit_code == 128 + SIGSEGV);
  // No account of its own, and no memory hint for a signal that is not SIGKILL.
  CHECK(verdict.details == Lines{"(the rank wrote nothing to its error output)"});
}

TEST_CASE("job verdict: a rank killed by SIGKILL gets the out-of-memory hint", "[verdict]") {
  JobEndFacts facts = failed_with(exited(137));
  mpirun_said(facts, {"mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."});
  facts.rank_peaks = {{0, 1ull << 30}, {1, 3ull << 30}};

  SECTION("the container's out-of-memory count rose during the job") {
    facts.oom_kills_at_start = 2;
    facts.oom_kills_at_end = 3;
    auto verdict = decide_job_verdict(one_host, facts);
    CHECK(verdict.summary == "Rank 1 of 4 on host algo-1 was killed by signal 9 (SIGKILL).");
    CHECK(verdict.exit_code == 137);
    REQUIRE(verdict.details.size() == 2);
    CHECK(verdict.details[0] == "(the rank wrote nothing to its error output)");
    CHECK(verdict.details[1] ==
          "The kernel's out-of-memory killer ended 1 process of this container during the job (rank 1's memory had "
          "peaked at 3.0 GiB when last seen; this host has 16.0 GiB of memory): lower mini_batch_size (256 images "
          "per host over 4 ranks) or image_shape, run fewer ranks per host (processes_per_host), or use an instance "
          "with more memory.");
  }
  SECTION("several processes ended") {
    facts.oom_kills_at_start = 0;
    facts.oom_kills_at_end = 3;
    CHECK_THAT(decide_job_verdict(one_host, facts).details.back(),
               StartsWith("The kernel's out-of-memory killer ended 3 processes of this container"));
  }
  SECTION("the count did not rise, or cannot be read: SIGKILL is only often the out-of-memory killer") {
    facts.oom_kills_at_start = 2;
    facts.oom_kills_at_end = 2;
    const auto unchanged = decide_job_verdict(one_host, facts).details.back();
    CHECK_THAT(unchanged, StartsWith("SIGKILL is often the kernel's out-of-memory killer (rank 1's memory had peaked "
                                     "at 3.0 GiB when last seen; this host has 16.0 GiB of memory); if it was, lower "
                                     "mini_batch_size"));
    facts.oom_kills_at_start.reset();
    facts.oom_kills_at_end = 9;
    CHECK(decide_job_verdict(one_host, facts).details.back() == unchanged);
  }
  SECTION("a user command's rank, whose peak was never seen") {
    facts.rank_peaks.clear();
    const auto job = job_on({"algo-1"}, 4, Workload::user_command);
    CHECK(decide_job_verdict(job, facts).details.back() ==
          "SIGKILL is often the kernel's out-of-memory killer (this host has 16.0 GiB of memory); if it was, use less "
          "memory per rank, run fewer ranks per host (processes_per_host), or use an instance with more memory.");
  }
}

TEST_CASE("job verdict: an abort racing its reason, the earliest reason is the first failure", "[verdict]") {
  // Rank 1 failed and wrote its reason; rank 0, its collective broken, failed a moment later and aborted,
  // and mpirun's abort message names rank 0 with rank 0's code.
  JobEndFacts facts = failed_with(exited(1));
  mpirun_said(facts, {rule, "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD", "with errorcode 1.",
                      rule});
  facts.reasons = {reason(1, 124, 100, {"no step completed within 60 s"}),
                   reason(0, 1, 200, {"a peer closed the connection"})};
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.summary == "Rank 1 of 4 on host algo-1 exited with code 124.");
  // The first failure's code, not mpirun's (rank 0's).
  CHECK(verdict.exit_code == 124);
  CHECK(verdict.details == Lines{"[train] error: no step completed within 60 s"});

  SECTION("mpirun's word stands for a rank that left no reason (killed before it could write one)") {
    JobEndFacts killed_first = failed_with(exited(137));
    mpirun_said(killed_first,
                {"mpirun noticed that process rank 3 with PID 0 on node vm exited on signal 9 (Killed)."});
    killed_first.reasons = {reason(0, 1, 200, {"a peer closed the connection"})};
    auto named = decide_job_verdict(one_host, killed_first);
    CHECK(named.summary == "Rank 3 of 4 on host algo-1 was killed by signal 9 (SIGKILL).");
    CHECK(named.exit_code == 137);
    // Rank 0's reason is not rank 3's.
    CHECK_THAT(named.details.front(), Contains("the rank wrote nothing"));
  }
  SECTION("a reason that records a signal (`train -- CMD` whose command was killed)") {
    JobEndFacts signalled = failed_with(exited(1));
    signalled.reasons = {reason(2, 0, 50, {}, SIGABRT), reason(1, 1, 60, {"later"})};
    auto named = decide_job_verdict(one_host, signalled);
    CHECK(named.summary == "Rank 2 of 4 on host algo-1 was killed by signal 6 (SIGABRT).");
    CHECK(named.exit_code == 128 + SIGABRT);
  }
}

TEST_CASE("job verdict: a reason from another host, relayed through mpirun's output only", "[verdict]") {
  // The master (algo-1) holds ranks 0-1; rank 3 runs on algo-2, whose reason folder the master cannot see.
  const auto job = job_on({"algo-1", "algo-2"}, 2);
  JobEndFacts facts = failed_with(exited(65));
  mpirun_said(facts, exit_code_block(3, 65));
  facts.error_tails[3] = {"[train] error: hyperparameter `learning_rate` is -1 but must be at least 0"};
  auto verdict = decide_job_verdict(job, facts);
  CHECK(verdict.summary == "Rank 3 of 4 on host algo-2 exited with code 65.");
  CHECK(verdict.exit_code == 65);
  CHECK(verdict.details == facts.error_tails[3]);

  SECTION("a rank our hosts do not account for is named by mpirun's node") {
    JobEndFacts far = failed_with(exited(137));
    mpirun_said(far, {"mpirun noticed that process rank 9 with PID 0 on node ip-10-0-1-7 exited on signal 9 "
                      "(Killed)."});
    CHECK(decide_job_verdict(job, far).summary == "Rank 9 of 4 on host ip-10-0-1-7 was killed by signal 9 (SIGKILL).");
  }
}

TEST_CASE("job verdict: mpirun's own failure before any rank reported", "[verdict]") {
  JobEndFacts facts = failed_with(exited(1));
  mpirun_said(facts, {rule, "There are not enough slots available in the system to satisfy the 8",
                      "slots that were requested by the application:", "", "  /usr/local/bin/train", rule});
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.kind == JobVerdict::Kind::failed);
  CHECK(verdict.summary == "mpirun exited with code 1 before any rank reported a failure.");
  CHECK(verdict.exit_code == 1);
  CHECK(verdict.details == Lines{"There are not enough slots available in the system to satisfy the 8",
                                 "slots that were requested by the application:", "  /usr/local/bin/train"});

  SECTION("mpirun killed by a signal") {
    JobEndFacts signalled = failed_with(killed(SIGSEGV));
    auto by_signal = decide_job_verdict(one_host, signalled);
    CHECK(by_signal.summary == "mpirun was killed by signal 11 (SIGSEGV) before any rank reported a failure.");
    CHECK(by_signal.exit_code == 128 + SIGSEGV);
  }
  SECTION("mpirun never reaped: an internal error, never 0") {
    JobEndFacts lost;
    auto unknown = decide_job_verdict(one_host, lost);
    CHECK(unknown.summary == "mpirun did not report its status before any rank reported a failure.");
    CHECK(unknown.exit_code == exit_code::internal_error);
  }
}

TEST_CASE("job verdict: a lost host's daemon is named on the first line, which no limit cuts", "[verdict]") {
  // tests/cluster (a worker host dies): the ranks of the master's host complain about their vanished peer, and
  // mpirun's lines grow past the failure file's limit; the cause must stay in it.
  const auto job = job_on({"algo-1", "algo-2", "algo-3"}, 2);
  JobEndFacts facts = failed_with(exited(205));
  mpirun_said(facts, {rule, "ORTE has lost communication with a remote daemon.", "",
                      "  HNP daemon   : [[42303,0],0] on node algo-1", "  Remote daemon: [[42303,0],1] on node algo-2",
                      "", "This is usually due to either a failure of the TCP network", rule});
  for (int i = 0; i < 40; ++i) mpirun_said(facts, {"An MPI communication peer process has unexpectedly disconnected."});
  const auto verdict = decide_job_verdict(job, facts);
  CHECK(verdict.exit_code == 205);
  CHECK_THAT(verdict.summary, StartsWith("mpirun exited with code 205 before any rank reported a failure. mpirun lost "
                                         "its daemon on host algo-2: that host died"));
  CHECK(verdict.summary.find('\n') == std::string::npos);
  const std::string text = compose_failure_text(verdict.summary, verdict.details);
  CHECK_THAT(text.substr(0, text.find('\n')), Contains("mpirun lost its daemon on host algo-2"));
}

TEST_CASE("job verdict: mpirun refused its command line, custom_mpi_options named", "[verdict]") {
  const auto job = job_on({"algo-1"}, 2, Workload::train_resnet,
                          {{"custom_mpi_options", "--bogus-option -x A=1"}});
  JobEndFacts facts = failed_with(exited(1));
  mpirun_said(facts, {"mpirun: Error: unknown option \"--bogus-option\"", "Type 'mpirun --help' for usage."});
  auto verdict = decide_job_verdict(job, facts);
  CHECK(verdict.summary == "mpirun refused its command line: mpirun does not know the option \"--bogus-option\".");
  CHECK(verdict.exit_code == exit_code::launch_failed);
  REQUIRE(verdict.details.size() == 3);
  CHECK(verdict.details[0] == "The hyperparameter custom_mpi_options adds \"--bogus-option -x A=1\" to it; check "
                              "those options against the image's `mpirun --help`.");
  CHECK(verdict.details[2] == "Type 'mpirun --help' for usage.");
}

TEST_CASE("job verdict: SIGTERM before the ranks start", "[verdict]") {
  JobEndFacts facts = failed_with(exited(1));
  facts.stop_signals = {{SIGTERM, at_second(0)}};
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.kind == JobVerdict::Kind::stopped);
  CHECK(verdict.exit_code == 128 + SIGTERM);
  CHECK(verdict.summary ==
        "The job was stopped by SIGTERM (SageMaker's stop or a spot interruption); the ranks were asked to "
        "checkpoint and exit, and mpirun then exited with code 1. No checkpoint was written after the stop request "
        "(the ranks were ended first); a restarted job resumes from the last earlier checkpoint in "
        "/opt/ml/checkpoints, if there is one.");
  CHECK(verdict.details.empty());
}

TEST_CASE("job verdict: SIGTERM while training", "[verdict]") {
  // The ranks checkpointed and exited 0: still a stopped job, not a finished one.
  JobEndFacts facts = failed_with(exited(0));
  facts.stop_signals = {{SIGTERM, at_second(30)}};
  facts.checkpoint_after_stop = true;
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.kind == JobVerdict::Kind::stopped);
  CHECK(verdict.exit_code == 143);
  CHECK_THAT(verdict.summary, Contains("mpirun then exited with code 0. A checkpoint was written after the stop "
                                       "request (/opt/ml/checkpoints/checkpoint.safetensors): a restarted job "
                                       "resumes from it."));

  SECTION("a user command has no checkpoint of train's to speak of") {
    facts.checkpoint_after_stop = false;
    const auto job = job_on({"algo-1"}, 4, Workload::user_command);
    CHECK_THAT(decide_job_verdict(job, facts).summary, Catch::EndsWith("and mpirun then exited with code 0."));
  }
  SECTION("a rank that fails while it stops does not make it a failure") {
    facts.failure_seen = at_second(31);
    facts.reasons = {reason(1, 1, 100, {"interrupted"})};
    CHECK(decide_job_verdict(one_host, facts).kind == JobVerdict::Kind::stopped);
  }
  SECTION("mpirun that never ended") {
    facts.mpirun_status.reset();
    CHECK_THAT(decide_job_verdict(one_host, facts).summary, Contains("and mpirun then did not exit."));
  }
}

TEST_CASE("job verdict: SIGTERM after a rank already failed keeps the rank's reason", "[verdict]") {
  // A rank timed out; mpirun hung on its teardown, and the operator stopped the job that seemed to hang.
  JobEndFacts facts = failed_with(killed(SIGKILL));
  facts.reasons = {reason(1, 124, 100, {"no step completed within 60 s"})};
  facts.failure_seen = at_second(10);
  facts.stop_signals = {{SIGTERM, at_second(15)}};
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.kind == JobVerdict::Kind::failed);
  CHECK(verdict.summary == "Rank 1 of 4 on host algo-1 exited with code 124.");
  CHECK(verdict.exit_code == 124);

  SECTION("seen at the same moment: the failure still comes first") {
    facts.failure_seen = at_second(15);
    CHECK(decide_job_verdict(one_host, facts).exit_code == 124);
  }
}

TEST_CASE("job verdict: a stop the job did not ask for is a failure in the rank's words", "[verdict]") {
  // A SIGTERM reached rank 1, not the launcher: every rank checkpointed, rank 1 exited 143 with its sentence.
  const std::string sentence =
      "Rank 1 of 4 on host algo-1 received SIGTERM from process 4321 (kill) of user root (uid 0), a stop the job did "
      "not ask for: the ranks wrote a checkpoint at step 3 of 75 and stopped, so the job did not finish.";
  JobEndFacts facts = failed_with(exited(143));
  mpirun_said(facts, exit_code_block(1, 143));
  facts.reasons = {reason(1, 143, 100, {sentence, "A job is stopped by a signal to train ..."})};
  facts.reasons.front().kind = RankReasonKind::headline;
  facts.error_tails[1] = {"[train] error: " + sentence, "A job is stopped by a signal to train ..."};
  facts.failure_seen = at_second(10);
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.kind == JobVerdict::Kind::failed);
  CHECK(verdict.exit_code == 143);
  CHECK(verdict.summary == sentence);
  CHECK(verdict.details == Lines{"A job is stopped by a signal to train ..."});

  SECTION("the launcher's own stop before it: the job was stopped, as asked") {
    facts.stop_signals = {{SIGTERM, at_second(9)}};
    CHECK(decide_job_verdict(one_host, facts).kind == JobVerdict::Kind::stopped);
  }
  SECTION("the same reason of the rank's own kind keeps the usual first line") {
    facts.reasons.front().kind = RankReasonKind::rank;
    CHECK(decide_job_verdict(one_host, facts).summary == "Rank 1 of 4 on host algo-1 exited with code 143.");
  }
}

TEST_CASE("job verdict: a signal sent to mpirun itself is named with its sender", "[verdict]") {
  // mpirun ends the ranks and exits 1 on SIGTERM, silently; the witness preloaded into it saw the signal.
  JobEndFacts facts = failed_with(exited(1));
  SignalSender sender;
  sender.signal = SIGINT;
  sender.pid = 4321;
  sender.uid = 0;
  sender.command = "kill";
  facts.mpirun_signals = {{sender, at_second(20)}};
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.kind == JobVerdict::Kind::failed);
  CHECK(verdict.exit_code == 128 + SIGINT);
  CHECK(verdict.summary == "mpirun received SIGINT from process 4321 (kill) of user root (uid 0), a stop the job did "
                           "not ask for: it ended the ranks and exited with code 1.");

  SECTION("a rank that failed before it keeps its reason") {
    facts.reasons = {reason(1, 3, 100, {"boom"})};
    facts.failure_seen = at_second(10);
    CHECK(decide_job_verdict(one_host, facts).summary == "Rank 1 of 4 on host algo-1 exited with code 3.");
  }
  SECTION("train's own stop comes first") {
    facts.stop_signals = {{SIGTERM, at_second(19)}};
    CHECK(decide_job_verdict(one_host, facts).kind == JobVerdict::Kind::stopped);
  }
}

TEST_CASE("job verdict: ranks that never started, and mpirun ended by train", "[verdict]") {
  JobEndFacts facts = failed_with(killed(SIGSEGV));
  facts.ranks_never_started_after = std::chrono::seconds(900);
  mpirun_said(facts, {"[vm:1] [[1,0],0] ORTE_ERROR_LOG: The system limit on number of pipes a process can open was "
                      "reached in file iof_base_setup.c at line 116"});
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.kind == JobVerdict::Kind::failed);
  CHECK(verdict.exit_code == 124);
  CHECK(verdict.summary == "No rank started within 900 s of mpirun's start (TRAIN_RANKS_TIMEOUT_SECONDS): train ended "
                           "mpirun, which then was killed by signal 11 (SIGSEGV).");
  CHECK_THAT(verdict.details.back(), Contains("raise TRAIN_RANKS_TIMEOUT_SECONDS"));
}

TEST_CASE("job verdict: two signals, the first one names the stop", "[verdict]") {
  JobEndFacts facts = failed_with(killed(SIGKILL));
  facts.stop_signals = {{SIGTERM, at_second(0)}, {SIGINT, at_second(2)}};
  auto verdict = decide_job_verdict(one_host, facts);
  CHECK(verdict.kind == JobVerdict::Kind::stopped);
  CHECK(verdict.exit_code == 128 + SIGTERM);
  CHECK_THAT(verdict.summary, StartsWith("The job was stopped by SIGTERM "));
  CHECK_THAT(verdict.summary, Contains("mpirun then was killed by signal 9 (SIGKILL). No checkpoint was written"));

  SECTION("a rank that failed between the two signals came after the stop") {
    facts.failure_seen = at_second(1);
    facts.reasons = {reason(0, 1, 100, {"stopped mid-step"})};
    CHECK(decide_job_verdict(one_host, facts).kind == JobVerdict::Kind::stopped);
  }
}

TEST_CASE("job verdict: mpirun ended by train after the bounded teardown", "[verdict]") {
  // A worker's network went; its ranks gave up, and mpirun waited for its daemon until train ended it.
  const auto job = job_on({"algo-1", "algo-2"}, 2);
  JobEndFacts facts = failed_with(killed(SIGTERM));
  facts.reasons = {reason(0, 124, 100, {"no step completed within 60 s", "host algo-2 may be gone"})};
  facts.failure_seen = at_second(70);
  facts.teardown_forced_after = std::chrono::seconds(20);
  auto verdict = decide_job_verdict(job, facts);
  CHECK(verdict.summary == "Rank 0 of 4 on host algo-1 exited with code 124.");
  // The rank's code, not mpirun's 143 from train's SIGTERM.
  CHECK(verdict.exit_code == 124);
  CHECK(verdict.details ==
        Lines{"[train] error: no step completed within 60 s", "host algo-2 may be gone",
              "(mpirun did not end within 20 s of the ranks' failure, waiting for a host it could no longer reach or "
              "a rank that would not end; train ended it and every process it had started)"});

  SECTION("and a SIGTERM that came afterwards does not replace the reason") {
    facts.stop_signals = {{SIGTERM, at_second(95)}};
    CHECK(decide_job_verdict(job, facts).exit_code == 124);
  }
}

TEST_CASE("job verdict: the sshd's death as the cause", "[verdict]") {
  const auto job = job_on({"algo-1", "algo-2"}, 2);
  const std::string death = "The master's sshd died 6 times (the last: killed by signal 9 (SIGKILL)); the workers "
                            "could no longer reach the master.";
  JobEndFacts facts = failed_with(exited(1));
  mpirun_said(facts, {"ORTE has lost communication with a remote daemon."});
  facts.companion_trouble = death;
  auto verdict = decide_job_verdict(job, facts);
  CHECK(verdict.kind == JobVerdict::Kind::failed);
  CHECK(verdict.summary == death);
  CHECK(verdict.exit_code == 1);
  CHECK(verdict.details == Lines{"mpirun exited with code 1 before any rank reported a failure.",
                                 "ORTE has lost communication with a remote daemon."});

  SECTION("a rank's failure is the cause before the sshd's") {
    facts.reasons = {reason(1, 3, 100, {"bad data"})};
    CHECK(decide_job_verdict(job, facts).summary == "Rank 1 of 4 on host algo-1 exited with code 3.");
  }
  SECTION("and so is mpirun's refusal of its command line") {
    JobEndFacts refused = failed_with(exited(1));
    mpirun_said(refused, {"mpirun: Error: unknown option \"--nope\""});
    refused.companion_trouble = death;
    CHECK(decide_job_verdict(job, refused).exit_code == exit_code::launch_failed);
  }
}
