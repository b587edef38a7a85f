#!/usr/bin/env python3
"""Launch tests: the real `train` binary runs a one-host, four-rank job with mpirun on this machine.

    python3 test_launch.py --train /path/to/train [unittest arguments]

Each test makes its own /opt/ml-like directory (SAGEMAKER_BASE_DIR) with resourceconfig.json naming host
algo-1 alone, runs `train` (its own rank mode, or `train -- CMD` with a shell or Python command as the
ranks), and checks the exit code, output/failure or output/success, and the relayed output. Every wait has
a timeout; a test that times out kills what it started and fails.

"No process left": every test gives `train` a unique token in an environment variable (which mpirun exports
to the ranks, and every process inherits) and in the job directory's name. When `train` has exited, no
process whose command line or environment holds the token may be alive: not mpirun, not a rank, not
anything a rank started.

The PID-1 tests run `train` under `unshare --pid --fork --mount-proc` (as root), so it is PID 1 of its own
PID namespace as in a container: orphans are re-parented to it, and the kernel kills whatever is left the
moment it exits. Those tests therefore also prove that what was left was ended by the job itself (it ran
its SIGTERM trap), not by the kernel's SIGKILL.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import uuid

TRAIN = None  # set from --train

RANKS = 4
HOST = "algo-1"
# Bounds on every wait: generous for a loaded 2-core machine, finite so a broken launcher fails the test.
RUN_TIMEOUT = 60.0
READY_TIMEOUT = 30.0
# The bound: SIGTERM to `train` reaches every rank's program within this many seconds.
STOP_DELIVERY_BOUND = 2.0

SUMMARY_EXIT_3 = "Rank 1 of 4 on host algo-1 exited with code 3."
SUMMARY_SIGKILL = "Rank 2 of 4 on host algo-1 was killed by signal 9 (SIGKILL)."


# ---------------------------------------------------------------------------------------------------------
# Processes


def read_proc(pid, name):
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def all_pids():
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def parent_of(pid):
    stat = read_proc(pid, "stat").decode(errors="replace")
    close = stat.rfind(")")
    if close < 0:
        return None
    fields = stat[close + 2:].split()
    return int(fields[1]) if len(fields) > 1 else None


def process_state(pid):
    stat = read_proc(pid, "stat").decode(errors="replace")
    close = stat.rfind(")")
    return stat[close + 2:close + 3] if close >= 0 else ""


def processes_with_token(token):
    """(pid, command line) of every live process whose command line or environment holds `token`."""
    needle = token.encode()
    found = []
    for pid in all_pids():
        if pid == os.getpid():
            continue
        cmdline = read_proc(pid, "cmdline")
        if needle in cmdline or needle in read_proc(pid, "environ"):
            if process_state(pid) in ("Z", "X", ""):
                continue  # a zombie has already ended; its parent reaps it
            found.append((pid, cmdline.replace(b"\0", b" ").decode(errors="replace").strip()))
    return found


def kill_processes_with_token(token):
    for _ in range(50):
        left = processes_with_token(token)
        if not left:
            return
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


# ---------------------------------------------------------------------------------------------------------
# The test base: a job directory, a token, a way to run `train`


class LaunchTestCase(unittest.TestCase):
    def setUp(self):
        self.token = "tok" + uuid.uuid4().hex[:16]
        self.base = tempfile.mkdtemp(prefix=f"train-launch-{self.token}-")
        self.work = os.path.join(self.base, "work")  # scratch for the ranks' marker files
        os.makedirs(self.work)
        self.write_job(hyperparameters={"processes_per_host": str(RANKS)})
        with open(os.path.join(self.work, "orphan.sh"), "w") as f:
            f.write(ORPHAN)
        self.process = None
        self.stdout_path = os.path.join(self.work, "train.stdout")
        self.stderr_path = os.path.join(self.work, "train.stderr")

    def tearDown(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        kill_processes_with_token(self.token)
        shutil.rmtree(self.base, ignore_errors=True)

    # -- the job directory

    def write_job(self, hyperparameters):
        config = os.path.join(self.base, "input", "config")
        os.makedirs(config, exist_ok=True)
        with open(os.path.join(config, "resourceconfig.json"), "w") as f:
            json.dump({"current_host": HOST, "hosts": [HOST], "network_interface_name": "eth0"}, f)
        with open(os.path.join(config, "hyperparameters.json"), "w") as f:
            json.dump(hyperparameters, f)
        with open(os.path.join(config, "inputdataconfig.json"), "w") as f:
            json.dump({}, f)

    def rank_environment(self, rank):
        """The environment a rank's command wrote with `env > "$TEST_WORK/env.$OMPI_COMM_WORLD_RANK"`."""
        with open(os.path.join(self.work, f"env.{rank}")) as f:
            return dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)

    def output_path(self, name):
        return os.path.join(self.base, "output", name)

    def read_output(self, name):
        with open(self.output_path(name), "rb") as f:
            return f.read()

    # -- running train

    def environment(self, extra=None):
        env = dict(os.environ)
        for name in list(env):
            if name.startswith(("OMPI_", "PMIX_", "SM_", "TRAIN_")):
                del env[name]
        env["SAGEMAKER_BASE_DIR"] = self.base
        env["TRAIN_TEST_TOKEN"] = self.token
        env["TEST_WORK"] = self.work
        for name, value in (extra or {}).items():  # None: the variable left out
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def start(self, args, extra_env=None, pid1=False):
        command = [TRAIN] + list(args)
        if pid1:
            unshare = shutil.which("unshare")
            self.assertIsNotNone(unshare, "the PID-1 tests need util-linux's unshare")
            # --kill-child: if the test kills unshare, the kernel ends train and its whole PID namespace.
            command = [unshare, "--pid", "--fork", "--mount-proc", "--kill-child"] + command
        return self.start_command(command, extra_env)

    def start_command(self, command, extra_env=None):
        """Starts `command` (train, or something that runs it) with the job's environment and output files."""
        self.stdout_file = open(self.stdout_path, "wb")
        self.stderr_file = open(self.stderr_path, "wb")
        self.addCleanup(self.stdout_file.close)
        self.addCleanup(self.stderr_file.close)
        self.process = subprocess.Popen(command, env=self.environment(extra_env), stdin=subprocess.DEVNULL,
                                        stdout=self.stdout_file, stderr=self.stderr_file, cwd=self.work)
        return self.process

    def finish(self, timeout=RUN_TIMEOUT):
        """Waits for train to exit (killing it and failing after `timeout`); returns its exit code."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            kill_processes_with_token(self.token)
            self.fail(f"train did not exit within {timeout:.0f} s\n{self.logs()}")

    def run_train(self, args, extra_env=None, pid1=False):
        self.start(args, extra_env, pid1)
        return self.finish()

    def stdout_text(self):
        with open(self.stdout_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stderr_text(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")

    def logs(self):
        return f"--- train stdout:\n{self.stdout_text()}--- train stderr:\n{self.stderr_text()}---"

    # -- common checks

    def assert_exit_code(self, code, expected):
        self.assertEqual(code, expected, f"exit code {code}, expected {expected}\n{self.logs()}")

    def assert_nothing_left(self):
        left = processes_with_token(self.token)
        daemons = [(pid, cmd) for pid, cmd in left if os.path.basename(cmd.split(" ")[0]) in
                   ("mpirun", "orterun", "orted", "prted", "prterun")]
        self.assertEqual(daemons, [], f"mpirun or its daemon outlived train\n{self.logs()}")
        self.assertEqual(left, [], f"processes of the job still alive after train exited: {left}\n{self.logs()}")

    def failure_lines(self):
        self.assertTrue(os.path.exists(self.output_path("failure")), f"no output/failure\n{self.logs()}")
        self.assertFalse(os.path.exists(self.output_path("success")), "both output/failure and output/success")
        text = self.read_output("failure")
        self.assertLessEqual(len(text), 1024, "the failure file is longer than SageMaker's 1024-byte reason")
        self.assertFalse(any(name.startswith("failure.tmp") for name in os.listdir(self.output_path(""))),
                         "a temporary report file was left in output/")
        return text.decode("utf-8").split("\n")

    def wait_for_files(self, pattern, count):
        names = [pattern.format(rank) for rank in range(count)]

        def all_there():
            if self.process is not None and self.process.poll() is not None:
                self.fail(f"train exited ({self.process.returncode}) before {names} appeared\n{self.logs()}")
            return all(os.path.exists(os.path.join(self.work, name)) for name in names)

        wait_for(all_there, READY_TIMEOUT, f"files {names}")

    def rank_lines(self, text):
        """[(rank, text)] of every '[rank R] text' line; fails on any other line."""
        lines = []
        for line in text.splitlines():
            match = re.fullmatch(r"\[rank (\d+)\] (.*)", line, re.S)
            self.assertIsNotNone(match, f"a relayed line without its rank prefix: {line!r}")
            lines.append((int(match.group(1)), match.group(2)))
        return lines


def sh(script):
    """`train -- sh -c SCRIPT`: the script as every rank's command."""
    return ["--", "sh", "-c", textwrap.dedent(script)]


def private_dev_shm(case):
    """A mount namespace with a /dev/shm of its own, kept by a holder process until CASE ends, as a host's
    /dev/shm that only this test's jobs use: (the holder's pid, that /dev/shm's path from here, the command
    prefix that runs a command inside the namespace)."""
    holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               "mount -t tmpfs train-test-shm /dev/shm && echo ready && exec sleep 600"],
                              stdout=subprocess.PIPE, text=True)
    case.addCleanup(holder.stdout.close)
    case.addCleanup(holder.wait)
    case.addCleanup(holder.kill)
    case.assertEqual(holder.stdout.readline().strip(), "ready")
    return holder.pid, f"/proc/{holder.pid}/root/dev/shm", ["nsenter", "-t", str(holder.pid), "-m", "--"]


def map_until_the_end(case, path, prefix=()):
    """A process (run through PREFIX) that creates PATH (4 KiB) and maps it until CASE ends: what a live
    job's shared memory looks like to a sweep."""
    mapper = subprocess.Popen(list(prefix) + [sys.executable, "-c", (
        "import mmap, os, time\n"
        f"fd = os.open({path!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
        "os.ftruncate(fd, 4096)\n"
        "m = mmap.mmap(fd, 4096)\n"
        "print('mapped', flush=True)\n"
        "time.sleep(600)")], stdout=subprocess.PIPE, text=True)
    case.addCleanup(mapper.stdout.close)
    case.addCleanup(mapper.wait)
    case.addCleanup(mapper.kill)
    case.assertEqual(mapper.stdout.readline().strip(), "mapped")
    return mapper


def run_root_tests(doc, script, why_root, add_arguments=lambda parser: None, configure=lambda args: None):
    """main() of a launch test script beside this one: --train (the executable to test) and the script's own
    options (ADD_ARGUMENTS), the check for root (WHY_ROOT: what needs it), CONFIGURE(args), then its tests."""
    global TRAIN
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--train", required=True, help="the train executable to test")
    add_arguments(parser)
    args, rest = parser.parse_known_args()
    TRAIN = os.path.abspath(args.train)
    if os.geteuid() != 0:
        sys.exit(f"{script}: needs root ({why_root})")
    configure(args)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


# The rank's part of a stop test: a TERM trap that stamps the time, a ready file, a loop of short sleeps
# (sh runs a trap only between commands).
STOPPABLE_RANK = sh("""
    R=$OMPI_COMM_WORLD_RANK
    trap 'date +%s.%N > "$TEST_WORK/term.$R"; exit 0' TERM
    touch "$TEST_WORK/ready.$R"
    while :; do sleep 0.05; done
""")

# A process to leave behind (started with setsid, in a session of its own): a TERM trap that leaves a
# mark, and a ready file once the trap is set. Written to $TEST_WORK/orphan.sh; run as `sh orphan.sh NAME`.
ORPHAN = """
trap 'touch "$TEST_WORK/$1.term"; exit 0' TERM
touch "$TEST_WORK/$1.ready"
while :; do sleep 0.05; done
"""


# ---------------------------------------------------------------------------------------------------------
# The tests


class OneHostLaunch(LaunchTestCase):
    def test_success_with_train_rank_mode(self):
        # train's own ranks, training the smallest job there is: one step of ResNet-18 on 16x16 synthetic
        # images, two images per rank (batch norm needs two).
        self.write_job(hyperparameters={
            "processes_per_host": str(RANKS), "data_format": "synthetic", "num_classes": "10", "num_layers": "18",
            "image_shape": "3,16,16", "mini_batch_size": str(2 * RANKS), "max_steps": "1", "epochs": "1",
            "checkpoint_frequency": "0"})
        code = self.run_train([])
        self.assert_exit_code(code, 0)
        self.assertTrue(os.path.exists(self.output_path("success")), self.logs())
        self.assertFalse(os.path.exists(self.output_path("failure")), self.logs())
        lines = self.rank_lines(self.stdout_text())
        for rank in range(RANKS):
            pattern = (rf"rank {rank} of {RANKS} \(local rank {rank} of {RANKS}\) on host {HOST}: "
                       r"device cpu \(\d+ threads?\)")
            said = [text for r, text in lines if r == rank and re.fullmatch(pattern, text)]
            self.assertEqual(len(said), 1, f"rank {rank} did not report itself once\n{self.logs()}")
        self.assertIn((0, f"allreduce check passed: {RANKS} ranks summed to {RANKS * (RANKS + 1) // 2}"), lines)
        self.assertIn(f"all {RANKS} ranks finished successfully", self.stderr_text())
        self.assert_nothing_left()

    def test_rank_exiting_with_code_3(self):
        code = self.run_train(sh("""
            R=$OMPI_COMM_WORLD_RANK
            echo "hello from rank $R"
            if [ "$R" = 1 ]; then
                i=1
                while [ $i -le 30 ]; do
                    echo "rank 1 error line $i: something went wrong in the data loader" >&2
                    i=$((i + 1))
                done
                exit 3
            fi
            echo "noise from rank $R" >&2
            sleep 100
        """))
        self.assert_exit_code(code, 3)
        lines = self.failure_lines()
        self.assertEqual(lines[0], SUMMARY_EXIT_3, self.logs())
        details = [line for line in lines[1:] if line]
        self.assertTrue(details, "the failure file has no error lines of the rank")
        expected = [f"rank 1 error line {i}: something went wrong in the data loader" for i in range(1, 31)]
        # The last error lines of rank 1, the last one last; the first kept one may be cut at its start.
        self.assertEqual(details[-1], expected[-1])
        self.assertEqual(details[1:], expected[len(expected) - len(details) + 1:])
        self.assertTrue(expected[len(expected) - len(details)].endswith(details[0]))
        self.assertGreater(len(details), 5, "the failure file kept too few of the rank's error lines")
        text = "\n".join(lines)
        self.assertNotIn("noise from rank", text, "another rank's error output is in the failure reason")
        self.assertNotIn("mpirun", text)
        self.assertNotIn("[train] rank 1: command", text)
        # The rank's output went through, whole and prefixed.
        for rank in range(RANKS):
            self.assertIn(f"[rank {rank}] hello from rank {rank}\n", self.stdout_text())
        self.assertIn(f"[rank 1] {expected[-1]}\n", self.stderr_text())
        self.assert_nothing_left()

    def failure_lines_when_rank_2_kills(self, target, message):
        """The failure file's lines after rank 2 says `message` and SIGKILLs `target` (a shell word: its
        command's shell, or the rank process that started it); the job's exit code and summary checked."""
        code = self.run_train(sh(f"""
            R=$OMPI_COMM_WORLD_RANK
            if [ "$R" = 2 ]; then
                echo "{message}" >&2
                kill -KILL {target}
            fi
            sleep 100
        """))
        self.assert_exit_code(code, 137)
        lines = self.failure_lines()
        self.assertEqual(lines[0], SUMMARY_SIGKILL, self.logs())
        return lines

    def test_rank_killed_by_sigkill(self):
        lines = self.failure_lines_when_rank_2_kills("$$", "rank 2 is about to be killed")
        self.assertEqual(lines[1], "rank 2 is about to be killed")
        self.assert_nothing_left()

    def test_rank_process_itself_killed_by_sigkill(self):
        # Not the command but the rank process mpirun started (rank-exec) is killed, as the out-of-memory
        # killer might: the rank says nothing, mpirun's own message names it.
        lines = self.failure_lines_when_rank_2_kills("$PPID", "rank 2 kills its rank process")
        self.assertIn("rank 2 kills its rank process", lines[1:])
        self.assert_nothing_left()

    def test_sigterm_reaches_every_rank_within_2_seconds(self):
        self.check_stop_signal(signal.SIGTERM, pid1=False)

    def test_sigint_is_a_stop_request_too(self):
        self.check_stop_signal(signal.SIGINT, pid1=False)

    def check_stop_signal(self, sig, pid1):
        process = self.start(STOPPABLE_RANK, pid1=pid1)
        self.wait_for_files("ready.{}", RANKS)
        target = process.pid
        if pid1:
            # unshare forwards nothing: signal train itself, PID 1 of the namespace, from outside it.
            target = wait_for(lambda: next((pid for pid in all_pids() if parent_of(pid) == process.pid), None),
                              READY_TIMEOUT, "train under unshare")
            self.assertIn(b"train", read_proc(target, "cmdline"))
        sent = time.time()
        os.kill(target, sig)
        code = self.finish()
        self.assert_exit_code(code, 128 + sig)
        for rank in range(RANKS):
            path = os.path.join(self.work, f"term.{rank}")
            self.assertTrue(os.path.exists(path), f"rank {rank}'s command never got SIGTERM\n{self.logs()}")
            with open(path) as f:
                stamped = float(f.read().strip())
            delay = stamped - sent
            self.assertGreaterEqual(delay, -0.01, f"rank {rank} stopped before the signal was sent")
            self.assertLess(delay, STOP_DELIVERY_BOUND,
                            f"rank {rank}'s command got SIGTERM {delay:.2f} s after {sig.name} reached train")
        lines = self.failure_lines()
        self.assertTrue(lines[0].startswith(f"The job was stopped by {sig.name}"), lines[0])
        self.assertIn(f"received {sig.name}", self.stderr_text())
        if pid1:
            self.assertRegex(self.stderr_text(), r"starting \(pid 1\)")
        self.assert_nothing_left()

    def test_output_lines_are_relayed_whole(self):
        # Each rank writes 200 lines, each in three write() calls with pauses now and then, so mpirun
        # forwards lines in pieces and interleaves the ranks' chunks; plus one 20,000-byte line.
        script = textwrap.dedent("""
            import os, time
            r = int(os.environ["OMPI_COMM_WORLD_RANK"])
            letter = chr(ord("A") + r)
            for i in range(200):
                body = f"rank{r}-line{i}-" + letter * (10 + (i * 37 + r * 11) % 300)
                a, b = len(body) // 3, 2 * len(body) // 3
                os.write(1, body[:a].encode())
                if i % 25 == r:
                    time.sleep(0.03)
                os.write(1, body[a:b].encode())
                os.write(1, (body[b:] + "\\n").encode())
                if i % 10 == 0:
                    os.write(2, f"err-rank{r}-{i}\\n".encode())
            long = f"rank{r}-long-" + letter * 20000
            for at in range(0, len(long), 3000):
                os.write(1, long[at:at + 3000].encode())
            os.write(1, b"\\n")
        """)
        code = self.run_train(["--", sys.executable, "-c", script])
        self.assert_exit_code(code, 0)
        seen = {rank: [] for rank in range(RANKS)}
        longs = {}
        for rank, text in self.rank_lines(self.stdout_text()):
            letter = chr(ord("A") + rank)
            match = re.fullmatch(r"rank(\d+)-line(\d+)-([A-Z]+)", text)
            if match:
                self.assertEqual(int(match.group(1)), rank, f"rank {rank}'s line holds another rank's text: {text!r}")
                i = int(match.group(2))
                self.assertEqual(match.group(3), letter * (10 + (i * 37 + rank * 11) % 300),
                                 f"rank {rank}'s line {i} is not whole: {text!r}")
                seen[rank].append(i)
                continue
            self.assertEqual(text, f"rank{rank}-long-" + letter * 20000, f"an unexpected line from rank {rank}")
            longs[rank] = True
        for rank in range(RANKS):
            self.assertEqual(seen[rank], list(range(200)), f"rank {rank}'s lines are missing or out of order")
            self.assertIn(rank, longs, f"rank {rank}'s long line did not arrive whole")
        errors = self.rank_lines("\n".join(line for line in self.stderr_text().splitlines()
                                           if line.startswith("[rank ")))
        self.assertEqual(sorted(errors), sorted((r, f"err-rank{r}-{i}") for r in range(RANKS) for i in range(0, 200, 10)))
        self.assert_nothing_left()

    def test_user_command_gets_the_job_environment_and_its_arguments(self):
        exported = f"exported-{self.token}"
        code = self.run_train(
            ["--", "sh", "-c", 'env > "$TEST_WORK/env.$OMPI_COMM_WORLD_RANK"; '
                               'printf "%s\\n" "$@" > "$TEST_WORK/args.$OMPI_COMM_WORLD_RANK"',
             "argv0", "two words", "*", "$HOME", ""],
            extra_env={"MY_EXPORTED_SETTING": exported})
        self.assert_exit_code(code, 0)
        for rank in range(RANKS):
            env = self.rank_environment(rank)
            self.assertEqual(env.get("SM_CURRENT_HOST"), HOST)
            self.assertEqual(json.loads(env.get("SM_HOSTS", "null")), [HOST])
            self.assertRegex(env.get("SM_NUM_CPUS", ""), r"^[1-9][0-9]*$")
            self.assertEqual(env.get("OMPI_COMM_WORLD_RANK"), str(rank))
            self.assertEqual(env.get("OMPI_COMM_WORLD_SIZE"), str(RANKS))
            self.assertEqual(env.get("MY_EXPORTED_SETTING"), exported)
            self.assertEqual(env.get("SAGEMAKER_BASE_DIR"), self.base)
            with open(os.path.join(self.work, f"args.{rank}")) as f:
                # The command's own arguments as given, then the job's hyperparameters as the toolkit appends
                # them: processes_per_host is train's launcher key and the command's too.
                self.assertEqual(f.read(), "two words\n*\n$HOME\n\n--processes_per_host\n4\n")
        self.assertTrue(os.path.exists(self.output_path("success")))
        self.assert_nothing_left()

    def test_user_command_gets_its_own_hyperparameters_in_a_tuning_job(self):
        # As the SDK writes them (each value JSON-encoded), with the tuner's and the SDK's keys beside the
        # script's own, which train's ResNet schema would refuse.
        self.write_job(hyperparameters={
            "batch-size": "64", "lr": "0.01", "optimizer": '"adamw"', "verbose": "true",
            "_tuning_objective_metric": '"validation:accuracy"', "sagemaker_program": '"my_train.py"',
            "sagemaker_container_log_level": "10", "sagemaker_job_name": '"hpo-7"',
            "sagemaker_mpi_num_processes": "2", "sagemaker_mpi_custom_mpi_options": '"--NCCL_DEBUG WARN"'})
        code = self.run_train(
            # The environment as the command was started with it: dash (sh) drops names holding a hyphen
            # (SM_HP_BATCH-SIZE) from what it passes on; Python and bash keep them, as under the toolkit.
            ["--", "sh", "-c", 'tr "\\0" "\\n" < /proc/$$/environ > "$TEST_WORK/env.$OMPI_COMM_WORLD_RANK"; '
                               'printf "%s\\n" "$@" > "$TEST_WORK/args.$OMPI_COMM_WORLD_RANK"',
             "argv0", "--mine"],
            extra_env={"TRAINING_JOB_NAME": "hpo-7-003-abcd"})
        self.assert_exit_code(code, 0)
        started = sorted(name for name in os.listdir(self.work) if name.startswith("env."))
        self.assertEqual(started, ["env.0", "env.1"], "sagemaker_mpi_num_processes=2 should start 2 ranks")
        for rank in range(2):
            env = self.rank_environment(rank)
            self.assertEqual(env.get("SM_HP_BATCH-SIZE"), "64")
            self.assertEqual(env.get("SM_HP_LR"), "0.01")
            self.assertEqual(env.get("SM_HP_OPTIMIZER"), "adamw")
            self.assertNotIn("SM_HP__TUNING_OBJECTIVE_METRIC", env)
            self.assertEqual(json.loads(env.get("SM_HPS", "null")),
                             {"batch-size": 64, "lr": 0.01, "optimizer": "adamw", "verbose": True})
            user_args = ["--batch-size", "64", "--lr", "0.01", "--optimizer", "adamw", "--verbose", "True"]
            self.assertEqual(json.loads(env.get("SM_USER_ARGS", "null")), user_args)
            self.assertEqual(env.get("SM_USER_ENTRY_POINT"), "my_train.py")
            self.assertEqual(env.get("SM_MODULE_NAME"), "my_train")
            self.assertEqual(env.get("SM_LOG_LEVEL"), "10")
            self.assertEqual(env.get("CURRENT_HOST"), HOST)
            self.assertEqual(env.get("NCCL_DEBUG"), "WARN")
            self.assertEqual(json.loads(env.get("SM_TRAINING_ENV", "{}")).get("job_name"), "hpo-7-003-abcd")
            with open(os.path.join(self.work, f"args.{rank}")) as f:
                # The command's own arguments, then the hyperparameters as the toolkit's runner appends them.
                self.assertEqual(f.read().splitlines(), ["--mine"] + user_args)
        self.assertTrue(os.path.exists(self.output_path("success")))
        self.assert_nothing_left()

    def test_failure_file_written_by_the_job_is_never_overwritten(self):
        reason = "My script found a corrupt shard: part-00007 (wrote this itself)\n"
        with open(os.path.join(self.work, "reason"), "w") as f:
            f.write(reason)
        code = self.run_train(sh("""
            if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
                cp "$TEST_WORK/reason" "$SAGEMAKER_BASE_DIR/output/failure"
                exit 3
            fi
            sleep 100
        """))
        self.assert_exit_code(code, 3)
        self.failure_lines()
        self.assertEqual(self.read_output("failure").decode(), reason)
        self.assertIn(SUMMARY_EXIT_3, self.stderr_text())  # still said, in the log
        self.assert_nothing_left()

    def test_failure_file_of_an_earlier_run_is_kept_aside(self):
        os.makedirs(self.output_path(""), exist_ok=True)
        with open(self.output_path("failure"), "w") as f:
            f.write("an earlier run failed\n")
        code = self.run_train(sh("true"))
        self.assert_exit_code(code, 0)
        self.assertTrue(os.path.exists(self.output_path("success")))
        self.assertFalse(os.path.exists(self.output_path("failure")))
        self.assertEqual(self.read_output("failure.previous").decode(), "an earlier run failed\n")
        self.assert_nothing_left()

    def test_invalid_hyperparameter_exits_65(self):
        self.write_job(hyperparameters={"processes_per_host": "four"})
        code = self.run_train(sh('touch "$TEST_WORK/rank-started.$OMPI_COMM_WORLD_RANK"'))
        self.assert_exit_code(code, 65)
        lines = self.failure_lines()
        self.assertTrue(lines[0].startswith("The job description is invalid:"), lines[0])
        self.assertIn("processes_per_host", lines[0])
        self.assertEqual([name for name in os.listdir(self.work) if name.startswith("rank-started")], [])
        self.assert_nothing_left()

    def test_device_cuda_without_a_gpu_exits_65_before_any_rank(self):
        # No GPU visible (CUDA_VISIBLE_DEVICES empty hides any this machine has): refused by the launcher
        # with the reason, in seconds, before mpirun starts a rank.
        self.write_job(hyperparameters={"device": "cuda", "data_format": "synthetic", "num_classes": "10",
                                        "num_layers": "18", "image_shape": "3,16,16", "max_steps": "1"})
        self.start([], extra_env={"CUDA_VISIBLE_DEVICES": ""})
        code = self.finish(timeout=30)
        self.assert_exit_code(code, 65)
        lines = self.failure_lines()
        self.assertTrue(lines[0].startswith("The job description is invalid:"), lines[0])
        self.assertIn('hyperparameter `device` is "cuda" but this host has no usable GPU', lines[0])
        self.assertIn("use device=auto or device=cpu", "\n".join(lines))
        self.assertNotIn("[rank ", self.stdout_text(), "a rank started although the job was refused")
        self.assert_nothing_left()

    def test_device_auto_without_a_gpu_trains_on_the_cpu(self):
        # Each of the 2 ranks runs half the cores' OpenMP threads: the logged counts are OpenMP's own, which
        # would be every core's if the rank left OpenMP with what it read at the process's start.
        self.write_job(hyperparameters={"processes_per_host": "2", "data_format": "synthetic", "num_classes": "10",
                                        "num_layers": "18", "image_shape": "3,16,16", "mini_batch_size": "4",
                                        "max_steps": "1", "checkpoint_frequency": "0"})
        code = self.run_train([], extra_env={"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": None})
        self.assert_exit_code(code, 0)
        threads = max(1, len(os.sched_getaffinity(0)) // 2)
        counted = f"{threads} thread{'' if threads == 1 else 's'}"
        lines = self.rank_lines(self.stdout_text())
        for rank in (0, 1):
            text = next(text for r, text in lines if r == rank)
            self.assertEqual(text, f"rank {rank} of 2 (local rank {rank} of 2) on host algo-1: device cpu ({counted})")
        self.assertIn(f"engine: cpu ({counted}), float32", self.stdout_text() + self.stderr_text())
        self.assert_nothing_left()

    def test_omp_num_threads_of_the_user_is_each_rank_s_thread_count(self):
        self.write_job(hyperparameters={"processes_per_host": "2", "data_format": "synthetic", "num_classes": "10",
                                        "num_layers": "18", "image_shape": "3,16,16", "mini_batch_size": "4",
                                        "max_steps": "1", "checkpoint_frequency": "0"})
        code = self.run_train([], extra_env={"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "3"})
        self.assert_exit_code(code, 0)
        lines = self.rank_lines(self.stdout_text())
        for rank in (0, 1):
            text = next(text for r, text in lines if r == rank)
            self.assertEqual(text, f"rank {rank} of 2 (local rank {rank} of 2) on host algo-1: device cpu (3 threads)")
        self.assertIn("engine: cpu (3 threads), float32", self.stdout_text() + self.stderr_text())
        self.assert_nothing_left()

    def test_orphan_of_mpirun_is_ended_before_train_exits(self):
        # mpirun (through a wrapper named by TRAIN_MPIRUN) leaves a process of its own session behind;
        # it is re-parented to train, which ends it before it exits.
        self.check_mpirun_orphan(pid1=False)

    def check_mpirun_orphan(self, pid1):
        wrapper = os.path.join(self.work, "mpirun-wrapper")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\n"
                    'setsid sh "$TEST_WORK/orphan.sh" orphan </dev/null >/dev/null 2>&1 &\n'
                    'while [ ! -e "$TEST_WORK/orphan.ready" ]; do sleep 0.02; done\n'
                    'exec mpirun "$@"\n')
        os.chmod(wrapper, 0o755)
        code = self.run_train(sh("true"), extra_env={"TRAIN_MPIRUN": wrapper}, pid1=pid1)
        self.assert_exit_code(code, 0)
        self.assertTrue(os.path.exists(os.path.join(self.work, "orphan.ready")), self.logs())
        self.assertTrue(os.path.exists(os.path.join(self.work, "orphan.term")),
                        f"the orphan was not ended by train (no SIGTERM trap ran)\n{self.logs()}")
        self.assertTrue(os.path.exists(self.output_path("success")))
        if pid1:
            self.assertRegex(self.stderr_text(), r"starting \(pid 1\)")
        self.assert_nothing_left()

    def test_orphans_that_ignore_sigterm_are_killed(self):
        # mpirun leaves a process that ignores SIGTERM, and that process has started another one in a
        # session of its own (ignoring SIGTERM too): the second is re-parented to train only when the
        # first has been killed, and must be killed in turn.
        wrapper = os.path.join(self.work, "mpirun-wrapper")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\n"
                    "setsid sh -c 'trap \"\" TERM; setsid sleep 1000 & touch \"$TEST_WORK/stubborn.ready\"; wait' "
                    "</dev/null >/dev/null 2>&1 &\n"
                    'while [ ! -e "$TEST_WORK/stubborn.ready" ]; do sleep 0.02; done\n'
                    'exec mpirun "$@"\n')
        os.chmod(wrapper, 0o755)
        code = self.run_train(sh("true"), extra_env={"TRAIN_MPIRUN": wrapper})
        self.assert_exit_code(code, 0)
        self.assertTrue(os.path.exists(os.path.join(self.work, "stubborn.ready")), self.logs())
        self.assertTrue(os.path.exists(self.output_path("success")))
        self.assert_nothing_left()

    def test_orphan_of_user_command_holding_its_output_does_not_keep_the_job(self):
        # A daemon that keeps the rank's output open would keep mpirun waiting for it (300 s here).
        code = self.run_train(sh("""
            setsid sleep 300 &
            exit 0
        """))
        self.assert_exit_code(code, 0)
        self.assertTrue(os.path.exists(self.output_path("success")))
        self.assert_nothing_left()


class AsPid1(LaunchTestCase):
    """`train` as PID 1 of a PID namespace, as the ENTRYPOINT of a container."""

    def test_pid1_user_command_leaving_orphans(self):
        code = self.run_train(sh("""
            setsid sleep 300 &
            setsid sh "$TEST_WORK/orphan.sh" "orphan-$OMPI_COMM_WORLD_RANK" &
            while [ ! -e "$TEST_WORK/orphan-$OMPI_COMM_WORLD_RANK.ready" ]; do sleep 0.02; done
            exit 0
        """), pid1=True)
        self.assert_exit_code(code, 0)
        self.assertRegex(self.stderr_text(), r"starting \(pid 1\)")
        self.assertTrue(os.path.exists(self.output_path("success")), self.logs())
        for rank in range(RANKS):
            self.assertTrue(os.path.exists(os.path.join(self.work, f"orphan-{rank}.term")),
                            f"rank {rank}'s orphan was not ended by the job (no SIGTERM trap ran)\n{self.logs()}")
        self.assert_nothing_left()

    def test_pid1_orphan_of_mpirun_is_reaped_and_ended(self):
        self.check_mpirun_orphan(pid1=True)

    def test_pid1_sigterm_reaches_every_rank_within_2_seconds(self):
        self.check_stop_signal(signal.SIGTERM, pid1=True)

    def test_pid1_rank_exiting_with_code_3(self):
        code = self.run_train(sh("""
            if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then echo "bad input" >&2; exit 3; fi
            sleep 100
        """), pid1=True)
        self.assert_exit_code(code, 3)
        lines = self.failure_lines()
        self.assertEqual(lines[:2], [SUMMARY_EXIT_3, "bad input"])
        self.assert_nothing_left()

    # The helpers of OneHostLaunch, shared.
    check_stop_signal = OneHostLaunch.check_stop_signal
    check_mpirun_orphan = OneHostLaunch.check_mpirun_orphan


def main():
    global TRAIN
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True, help="the train executable to test")
    args, rest = parser.parse_known_args()
    TRAIN = os.path.abspath(args.train)
    if not (os.path.isfile(TRAIN) and os.access(TRAIN, os.X_OK)):
        sys.exit(f"test_launch.py: --train {args.train}: not an executable file")
    if shutil.which("mpirun") is None:
        sys.exit("test_launch.py: mpirun is not on PATH (install openmpi-bin)")
    if os.geteuid() != 0:
        sys.exit("test_launch.py: the PID-1 tests need root (unshare --pid --mount-proc)")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
