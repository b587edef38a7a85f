#!/usr/bin/env python3
"""Faults of the launcher's own (issue 31): report files that cannot be written where they belong, stops that
the job did not ask for, resource limits too low for mpirun or for the files the job writes, and ranks that
never start.

    python3 test_launcher_faults.py --train /path/to/train [unittest arguments]

Each scenario runs a small one-host job with the real `train` and mpirun (test_faults.py's FaultCase: its own
/opt/ml-like directory, a token that no process of the job may outlive), and checks the exit code, what
output/failure (or the log, where the failure file cannot be written) says, and that no process is left. As
root: the folders that cannot be moved are bind mounts in a mount namespace of the test's own.
"""

import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_launch  # noqa: E402
from test_faults import FaultCase, SMALL, SYNTHETIC  # noqa: E402
from test_launch import sh, wait_for  # noqa: E402

ONE_RANK = {"processes_per_host": "1"}


# ---------------------------------------------------------------------------------------------------------
# The failure file: this run's reason is written, or the job says loudly that it could not


class FailureFileInTheWay(FaultCase):
    """An earlier run's output/failure that is not a plain file, or that cannot be moved aside."""

    def failing_job(self, setup=None):
        """`train -- sh -c 'exit 3'` on one rank (inside `setup`'s mount namespace when given); its exit code."""
        self.job(ONE_RANK)
        if setup is None:
            return self.run_job(args=sh('echo "the rank failed on purpose" >&2; exit 3'))
        self.start_wrapped(setup, sh('echo "the rank failed on purpose" >&2; exit 3'))
        return self.finish(120)

    def this_runs_reason_is_written(self, code):
        self.assert_exit_code(code, 3)
        lines = self.failure_lines()
        self.assertEqual(lines[0], "Rank 0 of 1 on host algo-1 exited with code 3.", self.logs())
        self.assertIn("the rank failed on purpose", lines)
        self.assert_nothing_left()

    def test_an_earlier_failure_folder_is_moved_aside(self):
        os.makedirs(self.output_path("failure"))
        with open(os.path.join(self.output_path("failure"), "note"), "w") as f:
            f.write("an earlier run's folder\n")
        self.this_runs_reason_is_written(self.failing_job())
        with open(os.path.join(self.output_path("failure.previous"), "note")) as f:
            self.assertEqual(f.read(), "an earlier run's folder\n")
        self.assertIn(f"moved the failure file of an earlier run to {self.output_path('failure.previous')}",
                      self.stderr_text())

    def test_an_earlier_dangling_failure_link_is_moved_aside(self):
        os.makedirs(self.output_path(""))
        os.symlink(os.path.join(self.base, "nowhere"), self.output_path("failure"))
        self.this_runs_reason_is_written(self.failing_job())
        self.assertEqual(os.readlink(self.output_path("failure.previous")), os.path.join(self.base, "nowhere"))

    def test_an_earlier_failure_file_beside_a_previous_folder_is_moved_to_a_free_name(self):
        # failure.previous is a folder: the file cannot take its name.
        os.makedirs(os.path.join(self.output_path("failure.previous"), "older"))
        with open(self.output_path("failure"), "w") as f:
            f.write("an earlier run failed\n")
        self.this_runs_reason_is_written(self.failing_job())
        moved = self.output_path("failure.previous.1")
        with open(moved) as f:
            self.assertEqual(f.read(), "an earlier run failed\n")
        self.assertTrue(os.path.isdir(os.path.join(self.output_path("failure.previous"), "older")))
        self.assertIn(f"moved the failure file of an earlier run to {moved}", self.stderr_text())

    def test_a_failure_file_that_cannot_be_moved_aside_is_never_taken_for_this_runs_reason(self):
        # A bind mount cannot be renamed (EBUSY): the earlier reason stays where this run's would go. The
        # job says so at the start and at the end, and its exit code says that its reason could not be written.
        for kind, make in (("folder", 'mkdir -p "$BASE/stale"; echo old > "$BASE/stale/reason"'),
                           ("file", 'echo "an earlier run failed" > "$BASE/stale"')):
            with self.subTest(kind=kind):
                subprocess.run(["rm", "-rf", self.output_path(""), os.path.join(self.base, "stale")], check=True)
                os.makedirs(self.output_path(""))
                setup = (f'{make}\n'
                         f'if [ -d "$BASE/stale" ]; then mkdir "$BASE/output/failure"; '
                         f'else : > "$BASE/output/failure"; fi\n'
                         'mount --bind "$BASE/stale" "$BASE/output/failure"')
                code = self.failing_job(setup)
                self.assert_exit_code(code, 74)
                log = self.stderr_text()
                self.assertNotIn("moved the failure file of an earlier run", log)
                self.assertRegex(log, r"cannot move the failure file of an earlier run \(a " + kind + r"\), "
                                      r".*output/failure, aside: Device or resource busy")
                self.assertIn("Rank 0 of 1 on host algo-1 exited with code 3.", log)
                self.assertRegex(log, r"this run's failure reason could not be written to .*output/failure: it is "
                                      r"still the earlier run's")
                self.assert_nothing_left()
                # Outside the mount namespace output/failure is what was there before: nothing was written.
                if kind == "folder":
                    self.assertEqual(os.listdir(self.output_path("failure")), [])
                else:
                    self.assertEqual(os.path.getsize(self.output_path("failure")), 0)

    def test_an_invalid_job_does_not_keep_an_earlier_runs_reason(self):
        # The job description is refused before a rank starts: the earlier run's reason was kept as this one's.
        os.makedirs(self.output_path(""))
        with open(self.output_path("failure"), "w") as f:
            f.write("an earlier run failed\n")
        self.job({"processes_per_host": "four"})
        self.assert_exit_code(self.run_job(), 65)
        self.assertRegex(self.failure_lines()[0], r"^The job description is invalid: .*processes_per_host")
        with open(self.output_path("failure.previous")) as f:
            self.assertEqual(f.read(), "an earlier run failed\n")

    def test_a_dangling_link_the_job_leaves_is_replaced_by_the_reason(self):
        # The command itself leaves a dangling link at output/failure: no reason there, so train's goes in
        # its place (a file the job wrote would be kept).
        self.job(ONE_RANK)
        code = self.run_job(args=sh('ln -s "$SAGEMAKER_BASE_DIR/nowhere" "$SAGEMAKER_BASE_DIR/output/failure"; '
                                    'echo "the rank failed on purpose" >&2; exit 3'))
        self.this_runs_reason_is_written(code)
        self.assertFalse(os.path.islink(self.output_path("failure")))

    def test_a_folder_the_job_leaves_in_its_place_is_said_loudly(self):
        self.job(ONE_RANK)
        code = self.run_job(args=sh('mkdir "$SAGEMAKER_BASE_DIR/output/failure"; exit 3'))
        self.assert_exit_code(code, 74)
        self.assertRegex(self.stderr_text(), r"this run's failure reason could not be written to .*output/failure: "
                                             r"a folder is in its place")
        self.assertIn("Rank 0 of 1 on host algo-1 exited with code 3.", self.stderr_text())
        self.assert_nothing_left()


# ---------------------------------------------------------------------------------------------------------
# Stops the job did not ask for


class UnaskedStops(FaultCase):
    def test_a_signal_to_one_rank_is_a_failure_naming_the_rank_and_its_sender(self):
        # Every rank checkpointed and exited 0, and the launcher, which got no signal, wrote output/success
        # with model/ empty at step 3 of 75: SageMaker would have marked the job Completed with no model.
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(signal=sig.name):
                subprocess.run(["rm", "-rf", self.output_path(""), os.path.join(self.base, "model"),
                                os.path.join(self.base, "checkpoints")], check=True)
                self.job(dict(SYNTHETIC, max_steps="75"))
                self.start([], {"OMP_NUM_THREADS": "1"})
                self.wait_for_output("step=2 ")
                rank = self.rank_pid(1)
                self.assertIsNotNone(rank, self.logs())
                os.kill(rank, sig)
                code = self.finish()
                self.assert_failed(code, 128 + sig,
                                   rf"^Rank 1 of 2 on host algo-1 received {sig.name} from process {os.getpid()} "
                                   r"\(python3\) of user root \(uid 0\), a stop the job did not ask for: the ranks "
                                   r"wrote a checkpoint at step \d+ of 75 and stopped, so the job did not finish\.$",
                                   "never by one to a rank")
                self.assertTrue(os.path.exists(os.path.join(self.base, "checkpoints", "checkpoint.safetensors")))
                self.assertFalse(os.path.exists(os.path.join(self.base, "model", "model.safetensors")))

    def test_a_signal_to_mpirun_itself_is_named_with_its_sender(self):
        # mpirun ends the ranks and exits with code 1 on SIGTERM, SIGINT or SIGHUP, without a word: the report
        # said "mpirun exited with code 1 before any rank reported a failure".
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            with self.subTest(signal=sig.name):
                subprocess.run(["rm", "-rf", self.output_path(""), os.path.join(self.base, "checkpoints")], check=True)
                self.job(SYNTHETIC)
                self.start([], {"OMP_NUM_THREADS": "1"})
                self.wait_for_output("step=2 ")
                mpirun = wait_for(lambda: next((pid for pid, command in test_launch.processes_with_token(self.token)
                                                if command.startswith("mpirun ")), None), 10, "mpirun")
                os.kill(mpirun, sig)
                code = self.finish()
                self.assert_failed(code, 128 + sig,
                                   rf"^mpirun received {sig.name} from process {os.getpid()} \(python3\) of user root "
                                   r"\(uid 0\), a stop the job did not ask for: it ended the ranks and exited with "
                                   r"code 1\.$", "never by one to mpirun")
                # Nothing of the witness reaches the ranks.
                self.assertNotIn("signal_witness", self.stdout_text() + self.stderr_text())


# ---------------------------------------------------------------------------------------------------------
# Limits and a start that never ends


class LimitsAndStartUp(FaultCase):
    def run_limited(self, limit, args=(), extra_env=None, timeout=120):
        """`train ARGS` under `prlimit LIMIT`; its exit code."""
        self.start_command(["prlimit", limit, "--", test_launch.TRAIN] + list(args),
                           dict({"OMP_NUM_THREADS": "1"}, **(extra_env or {})))
        return self.finish(timeout)

    def test_ranks_that_never_start_are_bounded_by_the_start_up_timeout(self):
        # mpirun with 24 descriptors (the issue's `ulimit -n 24`) runs out of them while it starts the ranks and hangs; train waited for ever.
        wrapper = os.path.join(self.work, "mpirun-with-24-descriptors")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\nulimit -n 24\nexec mpirun "$@"\n')
        os.chmod(wrapper, 0o755)
        self.job(SYNTHETIC)
        code = self.run_job({"TRAIN_MPIRUN": wrapper, "TRAIN_RANKS_TIMEOUT_SECONDS": "5"}, timeout=90)
        self.assert_failed(code, 124, r"^No rank started within 5 s of mpirun's start \(TRAIN_RANKS_TIMEOUT_SECONDS\): "
                                      r"train ended mpirun, which then ", "raise TRAIN_RANKS_TIMEOUT_SECONDS")
        self.assertIn("The system limit on number of pipes a process can open was reached", self.stderr_text())

    def test_a_hard_limit_too_low_is_refused_before_anything_starts(self):
        self.job(SYNTHETIC)
        for limit, words in (("--nofile=24:24", r"open files \(RLIMIT_NOFILE, `ulimit -n`\): 24 \(soft\) and 24 "
                                                r"\(hard\), where mpirun and 2 ranks on each of 1 host need at least "
                                                r"\d+ descriptors\."),
                             ("--fsize=1000000:1000000", r"a file's size \(RLIMIT_FSIZE, `ulimit -f`\): 1000000 bytes "
                                                         r"\([^)]*\) \(soft\) and 1000000 bytes \([^)]*\) \(hard\), "
                                                         r"where the checkpoint of ResNet-18 needs at least \d+ bytes")):
            with self.subTest(limit=limit):
                code = self.run_limited(limit)
                self.assert_failed(code, 74, r"^The job cannot run with this process's limit on " + words)
                self.assertNotIn("mpirun command", self.stderr_text())

    def test_a_soft_limit_too_low_is_raised_to_the_hard_limit(self):
        self.job(dict(SYNTHETIC, max_steps="2"))
        for limit, said in (("--nofile=24:", "raised the limit on open files (`ulimit -n`) from 24 to its hard limit"),
                            ("--fsize=1000000:", "raised the limit on a file's size (`ulimit -f`) from 1000000 bytes "
                                                 "(1 MiB) to its hard limit")):
            with self.subTest(limit=limit):
                subprocess.run(["rm", "-rf", self.output_path("")], check=True)
                self.assert_exit_code(self.run_limited(limit), 0)
                self.assertIn(said, self.stderr_text())
                self.assertTrue(os.path.exists(self.output_path("success")))
                self.assert_nothing_left()

    def test_a_checkpoint_past_the_file_size_limit_fails_cleanly(self):
        # A limit the start-up check lets through (the least a checkpoint of ResNet-18 with one class takes, and a
        # byte) and the checkpoint of two classes does not fit: SIGXFSZ killed the rank (exit 153) and left its
        # temporary file; now the write fails, the rank names the file and the limit, and nothing is left.
        self.job(dict(SMALL, checkpoint_frequency="1"), {"train": self.folder()})
        self.run_limited("--fsize=1000:1000")
        least = int(re.search(r"needs at least (\d+) bytes", self.failure_text()).group(1))
        subprocess.run(["rm", "-rf", self.output_path("")], check=True)
        code = self.run_limited(f"--fsize={least + 1}:{least + 1}")
        self.assert_failed(code, 74, r"^Rank 0 of 2 on host algo-1 exited with code 74\.$", "File too large",
                           "raise the limit on a file's size (`ulimit -f`")
        checkpoints = os.path.join(self.base, "checkpoints")
        self.assertEqual([name for name in os.listdir(checkpoints) if ".tmp-" in name], [], self.logs())


def main():
    test_launch.run_root_tests(__doc__, "test_launcher_faults.py", "mount namespaces")


if __name__ == "__main__":
    main()
