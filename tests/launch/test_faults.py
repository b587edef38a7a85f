#!/usr/bin/env python3
"""Fault scenarios (issue 15): the real `train` against hostile jobs, each scenario with what train must do
and its exit code, as docs/faults.md's fault table lists them.

    python3 test_faults.py --train /path/to/train [--repeat N] [unittest arguments]

Every scenario runs a small one-host job (2 ranks, ResNet-18 on 16x16 images: about a second of training)
in its own /opt/ml-like directory, and checks the exit code, output/failure (or output/success) and that no
process of the job is left (test_launch.py's token). The failure reasons are checked `--repeat` times per
failure kind (default 20): whether mpirun relays a rank's reason before the job is torn down is a race, and
the rank's reason must reach the failure file every time. The tests that need a full or read-only disk
mount a small tmpfs or a read-only bind mount in a mount namespace of their own (`unshare --mount`), so they
run as root, as the launch tests do.
"""

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_launch  # noqa: E402
from test_launch import LaunchTestCase, processes_with_token, read_proc, wait_for  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPEAT = 20  # per failure kind; set from --repeat
HOST = "algo-1"

# The smallest real training there is: 2 ranks, 2 images each per step.
SMALL = {"num_layers": "18", "image_shape": "3,16,16", "mini_batch_size": "4", "processes_per_host": "2",
         "epochs": "1", "checkpoint_frequency": "0", "augmentation_type": "none", "shuffle": "false"}
SYNTHETIC = dict(SMALL, data_format="synthetic", num_classes="4", max_steps="100000")


def write_images(root, classes=("ant", "bee"), per_class=8, size=20):
    """An image folder of small JPEGs (PIL comes with python3-torchvision, which scripts/setup.sh installs)."""
    from PIL import Image
    paths = []
    for c, name in enumerate(classes):
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for i in range(per_class):
            path = os.path.join(root, name, f"{i:03d}.jpg")
            colour = ((37 * i + 90 * c) % 256, (11 * i + 60 * c) % 256, (200 - 13 * i) % 256)
            Image.new("RGB", (size, size), colour).save(path, quality=90)
            paths.append(path)
    return paths


def tensor_offsets(path):
    """{name: (begin, end)} absolute byte ranges of a safetensors file's tensors."""
    with open(path, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(length))
    start = 8 + length
    return {name: (start + entry["data_offsets"][0], start + entry["data_offsets"][1])
            for name, entry in header.items() if name != "__metadata__"}


def flip_weight_exponent(path, tensor="conv1.weight"):
    """Flips one exponent bit of the first float of `tensor`, as a bad disk or copy would."""
    begin, _ = tensor_offsets(path)[tensor]
    with open(path, "r+b") as f:
        f.seek(begin + 3)  # little-endian float: the sign and the high exponent bits
        byte = f.read(1)[0]
        f.seek(begin + 3)
        f.write(bytes([byte ^ 0x40]))


def write_deeply_nested_safetensors(path, depth=100_000):
    """A safetensors file whose header holds one tensor entry nested `depth` lists deep."""
    header = b'{"conv1.weight": ' + b"[" * depth + b"]" * depth + b"}"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)


def memory_cgroup(test, limit_bytes):
    """A memory cgroup of the test's own with a limit (cgroup v1's memory controller, or v2's where it is enabled
    for children), removed when the test ends; the folder whose cgroup.procs takes a process."""
    own = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            own["v2" if controllers == "" else controllers] = path
    candidates = []
    if "memory" in own:
        candidates += [(os.path.join("/sys/fs/cgroup/memory", own["memory"].lstrip("/")), "memory.limit_in_bytes"),
                       ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")]
    if "v2" in own:
        candidates += [(os.path.join("/sys/fs/cgroup", own["v2"].lstrip("/")), "memory.max")]
    for parent, limit_file in candidates:
        if not os.path.exists(os.path.join(parent, limit_file)):
            continue
        folder = os.path.join(parent, f"train-test-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.mkdir(folder)
        except OSError:
            continue
        try:
            with open(os.path.join(folder, limit_file), "w") as f:
                f.write(str(limit_bytes))
        except OSError:  # v2 without the memory controller for children
            os.rmdir(folder)
            continue

        def remove(folder=folder):
            deadline = time.monotonic() + 10
            while os.path.exists(folder):
                try:
                    os.rmdir(folder)
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        test.addCleanup(remove)
        return folder
    test.fail(f"no memory cgroup can be made here (this process's cgroups: {own})")


class FaultCase(LaunchTestCase):
    """A job directory with channels, and `train` run plainly or inside a wrapper (a mount namespace)."""

    def job(self, hyperparameters, channels=None, modes=None):
        """Writes the job: hyperparameters (strings), channels {name: folder}, modes {name: input mode}."""
        config = os.path.join(self.base, "input", "config")
        os.makedirs(config, exist_ok=True)
        with open(os.path.join(config, "resourceconfig.json"), "w") as f:
            json.dump({"current_host": HOST, "hosts": [HOST]}, f)
        with open(os.path.join(config, "hyperparameters.json"), "w") as f:
            json.dump({key: str(value) for key, value in hyperparameters.items()}, f)
        channels = channels or {}
        modes = dict({name: "File" for name in channels}, **(modes or {}))
        with open(os.path.join(config, "inputdataconfig.json"), "w") as f:
            json.dump({name: {"TrainingInputMode": mode} for name, mode in modes.items()}, f)
        data = os.path.join(self.base, "input", "data")
        os.makedirs(data, exist_ok=True)
        for name, folder in channels.items():
            link = os.path.join(data, name)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(folder, link)

    def folder(self, name="images", **kwargs):
        root = os.path.join(self.base, name)
        write_images(root, **kwargs)
        return root

    def start_wrapped(self, setup, args=(), extra_env=None):
        """Runs `train ARGS` after the shell commands `setup` in a private mount namespace ($BASE is the job)."""
        env = {"TRAIN_BIN": test_launch.TRAIN, "BASE": self.base}
        env.update(extra_env or {})
        script = f'set -e\n{setup}\nexec "$TRAIN_BIN" "$@"'
        return self.start_command(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]
                                  + list(args), env)

    def run_job(self, extra_env=None, args=(), timeout=120):
        self.start(list(args), dict({"OMP_NUM_THREADS": "1"}, **(extra_env or {})))
        return self.finish(timeout)

    def failure_text(self):
        return "\n".join(self.failure_lines())

    def assert_failed(self, code, expected_code, first_line, *contained):
        """Exit code, a first line matching `first_line` (a regex), each of `contained` in the failure file."""
        self.assert_exit_code(code, expected_code)
        text = self.failure_text()
        self.assertRegex(text.split("\n")[0], first_line, self.logs())
        for part in contained:
            self.assertIn(part, text, f"{part!r} is not in the failure file\n{text}\n{self.logs()}")
        self.assertFalse(os.path.exists(self.output_path("success")))
        self.assert_nothing_left()
        return text

    def rank_pid(self, rank):
        """The pid of `train rank` for world rank `rank` of this test's job."""
        for pid, command in processes_with_token(self.token):
            if command.endswith(" rank") and f"OMPI_COMM_WORLD_RANK={rank}\0".encode() in read_proc(pid, "environ"):
                return pid
        return None

    def wait_for_output(self, text, timeout=60):
        def seen():
            if self.process.poll() is not None:
                self.fail(f"train exited ({self.process.returncode}) before {text!r} appeared\n{self.logs()}")
            return text in self.stdout_text() + self.stderr_text()
        wait_for(seen, timeout, repr(text))


# ---------------------------------------------------------------------------------------------------------
# 1. Checkpoints: checksums, the previous one kept


class DamagedCheckpoints(FaultCase):
    def two_checkpoints(self):
        """A finished job with checkpoints after epochs 0 and 1 (steps 4 and 8)."""
        self.job(dict(SMALL, epochs="2", checkpoint_frequency="1"), {"train": self.folder()})
        self.assert_exit_code(self.run_job(), 0)
        checkpoints = os.path.join(self.base, "checkpoints")
        self.assertEqual(sorted(os.listdir(checkpoints)), ["checkpoint.previous.safetensors", "checkpoint.safetensors"])
        shutil.rmtree(os.path.join(self.base, "output"))
        return os.path.join(checkpoints, "checkpoint.safetensors"), os.path.join(checkpoints,
                                                                                 "checkpoint.previous.safetensors")

    def test_a_damaged_newest_checkpoint_is_named_and_the_previous_one_resumed(self):
        newest, previous = self.two_checkpoints()
        flip_weight_exponent(newest)
        self.job(dict(SMALL, epochs="3", checkpoint_frequency="1"), {"train": os.path.join(self.base, "images")})
        code = self.run_job()
        self.assert_exit_code(code, 0)
        log = self.stderr_text() + self.stdout_text()
        self.assertIn(f'damaged checkpoint: {newest}: tensor "conv1.weight": its bytes do not match the checksum', log)
        self.assertIn(f"resuming from the previous checkpoint {previous} instead", log)
        self.assertIn(f"resuming from {previous}: step 4, epoch 1", log)
        self.assertTrue(os.path.exists(self.output_path("success")))
        self.assertTrue(os.path.exists(os.path.join(self.base, "checkpoints", "checkpoint.damaged.safetensors")))
        self.assert_nothing_left()

    def test_all_checkpoints_damaged_is_bad_input_with_what_to_delete(self):
        newest, previous = self.two_checkpoints()
        flip_weight_exponent(newest)
        flip_weight_exponent(previous, "fc.weight")
        code = self.run_job()
        self.assert_failed(code, 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$",
                           "fc.weight", f"rm {os.path.join(self.base, 'checkpoints')}/checkpoint*.safetensors")
        self.assertNotIn("step=", self.stdout_text(), "training went on from a damaged checkpoint")

    def test_a_corrupt_checkpoint_header_is_bad_input_not_an_internal_error(self):
        self.job(dict(SMALL, checkpoint_frequency="1"), {"train": self.folder()})
        self.assert_exit_code(self.run_job(), 0)
        shutil.rmtree(os.path.join(self.base, "output"))
        newest = os.path.join(self.base, "checkpoints", "checkpoint.safetensors")
        with open(newest, "r+b") as f:
            f.seek(12)
            f.write(b"\x00garbage")
        code = self.run_job()
        self.assert_failed(code, 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$", newest,
                           "header is not valid JSON")

    def test_a_checkpoint_header_nested_100000_deep_is_damaged_and_the_previous_one_resumed(self):
        # Issue 31: the rank crashed (SIGSEGV, 139) on it, from checkpoints/ as from the `model` channel.
        newest, previous = self.two_checkpoints()
        write_deeply_nested_safetensors(newest)
        self.job(dict(SMALL, epochs="3", checkpoint_frequency="1"), {"train": os.path.join(self.base, "images")})
        code = self.run_job()
        self.assert_exit_code(code, 0)
        log = self.stderr_text() + self.stdout_text()
        self.assertIn(f"damaged checkpoint: {newest}: header is not a safetensors header: it nests lists and objects "
                      "more than 64 levels deep", log)
        self.assertIn(f"resuming from {previous}: step 4, epoch 1", log)
        self.assertTrue(os.path.exists(os.path.join(self.base, "checkpoints", "checkpoint.damaged.safetensors")))
        self.assert_nothing_left()

    def test_a_model_channel_header_nested_100000_deep_is_bad_input(self):
        weights = os.path.join(self.base, "weights")
        os.makedirs(weights)
        write_deeply_nested_safetensors(os.path.join(weights, "model.safetensors"))
        self.job(SMALL, {"train": self.folder(), "model": weights})
        code = self.run_job()
        self.assert_failed(code, 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$",
                           "the `model` channel's weights cannot be used",
                           "it nests lists and objects more than 64 levels deep")

    def test_a_damaged_model_channel_is_bad_input(self):
        self.job(SMALL, {"train": self.folder()})
        self.assert_exit_code(self.run_job(), 0)
        weights = os.path.join(self.base, "weights")
        os.makedirs(weights)
        shutil.copy(os.path.join(self.base, "model", "model.safetensors"), weights)
        flip_weight_exponent(os.path.join(weights, "model.safetensors"), "layer1.0.conv1.weight")
        shutil.rmtree(os.path.join(self.base, "output"))
        self.job(SMALL, {"train": os.path.join(self.base, "images"), "model": weights})
        code = self.run_job()
        self.assert_failed(code, 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$",
                           "the `model` channel's weights cannot be used", 'tensor "layer1.0.conv1.weight"')


# ---------------------------------------------------------------------------------------------------------
# 2. The rank's own reason reaches the failure file, every time


class FailureReasonsRepeated(FaultCase):
    """Each failure kind REPEAT times: the first line names the failing rank, the rest holds its reason."""

    def repeat(self, kind, once):
        misses = []
        for attempt in range(REPEAT):
            for name in ("output", "checkpoints", "model"):
                shutil.rmtree(os.path.join(self.base, name), ignore_errors=True)
            problem = once()
            if problem:
                misses.append(f"run {attempt + 1}: {problem}")
            self.assert_nothing_left()
        print(f"\n{kind}: the rank's reason reached the failure file in {REPEAT - len(misses)} of {REPEAT} runs",
              flush=True)
        self.assertEqual(misses, [], f"{kind}: the failure file lost the reason\n" + "\n".join(misses))

    def outcome(self, code, expected_code, first_line, reason):
        """None when the run ended as expected, else what was wrong."""
        if code != expected_code:
            return f"exit code {code}, expected {expected_code}\n{self.logs()}"
        if not os.path.exists(self.output_path("failure")):
            return f"no failure file\n{self.logs()}"
        text = self.read_output("failure").decode(errors="replace")
        if not re.match(first_line, text.split("\n")[0]):
            return f"first line {text.splitlines()[0]!r}\n{text}"
        if reason not in text:
            return f"the reason {reason!r} is missing:\n{text}"
        return None

    def test_truncated_jpeg(self):
        images = self.folder()
        broken = os.path.join(images, "bee", "003.jpg")
        with open(broken, "rb") as f:
            data = f.read()
        with open(broken, "wb") as f:
            f.write(data[:len(data) * 2 // 5])
        self.job(SMALL, {"train": images})
        named = os.path.join(self.base, "input", "data", "train", "bee", "003.jpg")  # as the rank reads it
        self.repeat("truncated JPEG", lambda: self.outcome(
            self.run_job(), 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$", named))

    def test_full_disk(self):
        # checkpoints/ is a 1 MiB tmpfs: room for the launcher's check, none for a checkpoint.
        self.job(dict(SMALL, checkpoint_frequency="1"), {"train": self.folder()})
        setup = 'mkdir -p "$BASE/checkpoints"; mount -t tmpfs -o size=1m train-test-full "$BASE/checkpoints"'

        def once():
            self.start_wrapped(setup, extra_env={"OMP_NUM_THREADS": "1"})
            return self.outcome(self.finish(120), 74, r"^Rank 0 of 2 on host algo-1 exited with code 74\.$",
                                "No space left on device")
        self.repeat("full disk", once)

    def test_step_timeout(self):
        self.job(SYNTHETIC)

        def once():
            self.start([], {"OMP_NUM_THREADS": "1", "TRAIN_STEP_TIMEOUT_SECONDS": "2"})
            self.wait_for_output("step=2 ")
            pid = self.rank_pid(1)
            if pid is None:
                return f"rank 1's process not found\n{self.logs()}"
            os.kill(pid, signal.SIGSTOP)  # a hung rank
            return self.outcome(self.finish(120), 124, r"^Rank 0 of 2 on host algo-1 exited with code 124\.$",
                                "did not complete within 2 s")
        self.repeat("step timeout", once)

    def test_bad_config(self):
        # Every rank refuses the setting at the same moment, each aborting the job. (A setting the job
        # description alone shows wrong is refused before a rank starts; this one needs the data: 3 classes.)
        self.job(dict(SMALL, num_classes="2"), {"train": self.folder(classes=("ant", "bee", "cat"))})
        self.repeat("bad config", lambda: self.outcome(
            self.run_job(), 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$",
            "but the hyperparameter num_classes is 2, so labels must be 0 to 1"))


# ---------------------------------------------------------------------------------------------------------
# 3. The master's wait for silent hosts honours its deadline and SIGTERM


class SilentHosts(FaultCase):
    """40 hosts that resolve (127.0.0.2-41) and accept connections but never greet; this host's own "sshd"
    (127.0.0.1) answers. Probed one after another, each took 1.5 s: a 60 s sweep between looks at the
    deadline and signals."""

    HOSTS = [f"127.0.0.{i}" for i in range(2, 42)]

    def setUp(self):
        super().setUp()
        self.sockets = []
        greeter = socket.socket()
        greeter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        greeter.bind(("127.0.0.1", 0))
        greeter.listen(64)
        self.port = greeter.getsockname()[1]
        self.sockets.append(greeter)
        for host in self.HOSTS:
            silent = socket.socket()
            silent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            silent.bind((host, self.port))
            silent.listen(64)  # never accepted: connections complete, no greeting ever comes
            self.sockets.append(silent)
        threading.Thread(target=self.greet, args=(greeter,), daemon=True).start()
        config = os.path.join(self.base, "input", "config")
        os.makedirs(config, exist_ok=True)
        # "0-master" sorts first: this host is the master.
        with open(os.path.join(config, "resourceconfig.json"), "w") as f:
            json.dump({"current_host": "0-master", "hosts": ["0-master"] + self.HOSTS}, f)
        with open(os.path.join(config, "hyperparameters.json"), "w") as f:
            json.dump(SYNTHETIC, f)

    def tearDown(self):
        for s in self.sockets:
            s.close()
        super().tearDown()

    @staticmethod
    def greet(listener):
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            connection.sendall(b"SSH-2.0-test\r\n")
            connection.close()

    def env(self, timeout):
        return {"TRAIN_NETWORK_INTERFACE": "lo", "TRAIN_SSHD": "none", "TRAIN_SSH_PORT": str(self.port),
                "TRAIN_PEERS_TIMEOUT_SECONDS": str(timeout)}

    def test_the_deadline_is_kept_and_the_silent_hosts_listed_while_waiting(self):
        started = time.monotonic()
        code = self.run_job(self.env(7), timeout=60)
        elapsed = time.monotonic() - started
        self.assert_exit_code(code, 124)
        self.assertLess(elapsed, 10.0, f"a 7 s deadline took {elapsed:.1f} s\n{self.logs()}")
        self.assertRegex(self.stderr_text(), r"master: still waiting for 40 host\(s\) \(\d+ s of 7 s\): 127\.0\.0\.")
        lines = self.failure_lines()
        self.assertEqual(lines[0], f"40 host(s) did not answer on port {self.port} within 7 s: 127.0.0.10.")
        print(f"\n40 silent hosts, TRAIN_PEERS_TIMEOUT_SECONDS=7: exit 124 after {elapsed:.1f} s", flush=True)
        self.assert_nothing_left()

    def test_sigterm_while_waiting_ends_the_wait_within_a_second(self):
        self.start([], self.env(600))
        self.wait_for_output("master: waiting up to 600 s for the sshd of 40 other host(s)")
        time.sleep(2)  # probes in flight
        sent = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.finish(60)
        took = time.monotonic() - sent
        self.assert_exit_code(code, 143)
        self.assertLess(took, 1.5, f"SIGTERM took {took:.2f} s to end the wait\n{self.logs()}")
        self.assertEqual(self.failure_lines()[0], "Host 0-master was stopped by SIGTERM before its ranks started.")
        print(f"\nSIGTERM while waiting for 40 silent hosts: exit 143 after {took:.2f} s", flush=True)
        self.assert_nothing_left()


# ---------------------------------------------------------------------------------------------------------
# 4. The environment: found before training, its own exit code, never exit 0 without output/success


class Environment(FaultCase):
    def test_read_only_model_directory_is_found_before_training(self):
        self.job(SMALL, {"train": self.folder()})
        self.start_wrapped('mkdir -p "$BASE/model"; mount --bind "$BASE/model" "$BASE/model"; '
                           'mount -o remount,ro,bind "$BASE/model"')
        code = self.finish()
        self.assert_failed(code, 74, r"^The job cannot write its results: .*/model \(Read-only file system\)\.$",
                           "mount that folder writable", "nothing was trained")
        self.assertNotIn("allreduce check", self.stdout_text())

    def test_a_checkpoint_disk_with_no_room_is_found_before_training(self):
        self.job(dict(SMALL, checkpoint_frequency="1"), {"train": self.folder()})
        self.start_wrapped('mkdir -p "$BASE/checkpoints"; mount -t tmpfs -o size=8k train-test "$BASE/checkpoints"')
        code = self.finish()
        self.assert_failed(code, 74, r"^The job cannot write its results: .*/checkpoints \(No space left on device\)\.$",
                           "free space on that disk")
        self.assertNotIn("allreduce check", self.stdout_text())

    def test_a_full_tmpdir_is_found_before_anything_starts(self):
        # Open MPI's session directory is there: a full TMPDIR failed MPI_Init with PMIx errors and exit 1.
        self.job(SMALL, {"train": self.folder()})
        self.start_wrapped('mkdir -p "$BASE/tmp"; mount -t tmpfs -o size=4k train-test "$BASE/tmp"',
                           extra_env={"TMPDIR": os.path.join(self.base, "tmp")})
        code = self.finish()
        self.assert_failed(code, 74, r"^The job cannot write its results: .*/tmp \(No space left on device\)\.$",
                           "free space on that disk", "$TMPDIR")
        self.assertNotIn("mpirun command", self.stderr_text())

    def test_a_tmpdir_with_no_room_for_inflated_gzip_shards(self):
        # 128 images a shard: about 86 KB inflated, in a TMPDIR of 64 KiB (room for the launcher's check).
        records = os.path.join(self.base, "records")
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "make_dataset_records.py"), records,
                        "--limit", "256", "--shards", "2", "--gzip"], check=True, stdout=subprocess.DEVNULL,
                       timeout=120)
        self.job(SMALL, {"train": os.path.join(records, "tfrecord", "train")})
        # Open MPI keeps its session directory (PMIx's shared segments) in $TMPDIR too: elsewhere here, so
        # that it is train's own inflating that finds no room.
        self.start_wrapped('mkdir -p "$BASE/tmp"; mount -t tmpfs -o size=64k train-test "$BASE/tmp"',
                           extra_env={"TMPDIR": os.path.join(self.base, "tmp"),
                                      "OMPI_MCA_orte_tmpdir_base": self.base})
        code = self.finish()
        self.assert_failed(code, 74, r"^Rank [01] of 2 on host algo-1 exited with code 74\.$",
                           "No space left on device", "set TMPDIR to a writable folder with room")

    def test_read_only_output_directory_exits_74_without_a_success_file(self):
        self.job(SMALL, {"train": self.folder()})
        self.start_wrapped('mkdir -p "$BASE/output"; mount --bind "$BASE/output" "$BASE/output"; '
                           'mount -o remount,ro,bind "$BASE/output"')
        code = self.finish()
        self.assert_exit_code(code, 74)
        self.assertFalse(os.path.exists(self.output_path("success")))
        self.assertRegex(self.stderr_text(), r"The job cannot write its results: .*/output \(Read-only file system\)")
        self.assert_nothing_left()

    def test_output_that_turns_read_only_during_the_job_is_never_exit_0(self):
        # The ranks (a user command) finish, but output/ can no longer be written: no success file, so not 0.
        self.job(SMALL)
        self.start_wrapped('mkdir -p "$BASE/output"; mount --bind "$BASE/output" "$BASE/output"',
                           ["--", "sh", "-c", 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then '
                                              'mount -o remount,ro,bind "$BASE/output"; fi'])
        code = self.finish()
        self.assert_exit_code(code, 74)
        self.assertFalse(os.path.exists(self.output_path("success")))
        self.assertIn("Training finished, but train could not write", self.stderr_text())
        self.assert_nothing_left()


# ---------------------------------------------------------------------------------------------------------
# 5. Data that would silently change the job


class DataThatChangesTheJob(FaultCase):
    def test_a_symbolic_link_loop_in_a_class_folder(self):
        images = self.folder()
        os.symlink(os.path.join(images, "bee"), os.path.join(images, "bee", "again"))
        self.job(SMALL, {"train": images})
        bee = os.path.join(self.base, "input", "data", "train", "bee")  # as the ranks name it
        self.assert_failed(self.run_job(), 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$",
                           f"{bee}/again leads back to {bee} (a symbolic link loop)")

    def test_a_single_class(self):
        images = self.folder(classes=("ant",))
        self.job(SMALL, {"train": images})
        self.assert_failed(self.run_job(), 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$",
                           "has a single class: every sample's label is 0", "needs at least 2 classes")

    def lst_job(self, labels):
        images = self.folder()
        lst = os.path.join(self.base, "lists")
        os.makedirs(lst)
        names = sorted(os.path.relpath(os.path.join(d, f), images) for d, _, fs in os.walk(images) for f in fs)
        with open(os.path.join(lst, "train.lst"), "w") as f:
            for i, (name, label) in enumerate(zip(names, labels)):
                f.write(f"{i}\t{label}\t{name}\n")
        self.job(SMALL, {"train": images, "train_lst": lst})
        return os.path.join(self.base, "input", "data", "train_lst", "train.lst")  # as the ranks name it

    def test_a_label_far_out_of_range_in_an_lst_file(self):
        labels = [i % 2 for i in range(16)]
        labels[5] = 1000000
        lst = self.lst_job(labels)
        text = self.assert_failed(self.run_job(), 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$",
                                  f"has the label 1000000 ({lst}, byte offset ", "fix that label")
        self.assertNotIn("num_classes is 10", text)

    def test_a_label_far_beyond_the_others(self):
        labels = [i % 2 for i in range(16)]
        labels[9] = 500
        lst = self.lst_job(labels)
        self.assert_failed(self.run_job(), 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$",
                           f"has the label 500 ({lst}, byte offset ", "far beyond every other label (the next "
                           "highest is 1)", "make a model of 501 classes")


# ---------------------------------------------------------------------------------------------------------
# 6. Hangs and leftovers


class HangsAndLeftovers(FaultCase):
    def test_a_fifo_in_place_of_a_config_file(self):
        self.job(SYNTHETIC)
        hyperparameters = os.path.join(self.base, "input", "config", "hyperparameters.json")
        os.remove(hyperparameters)
        os.mkfifo(hyperparameters)
        expected = f"{hyperparameters}: expected a regular file holding JSON, found a FIFO (named pipe)"
        validate = subprocess.run([test_launch.TRAIN, "validate", self.base], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=30, env=self.environment())
        self.assertEqual(validate.returncode, 65, validate.stdout)
        self.assertIn(expected, validate.stdout)
        self.assert_failed(self.run_job(timeout=30), 65, r"^The job description is invalid: ", expected)

    def test_inflated_gzip_shards_are_left_nowhere_when_a_rank_is_killed(self):
        records = os.path.join(self.base, "records")
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "make_dataset_records.py"), records,
                        "--limit", "64", "--shards", "2", "--gzip"], check=True, stdout=subprocess.DEVNULL, timeout=120)
        tmp = os.path.join(self.base, "tmp")
        os.makedirs(tmp)
        self.job(dict(SMALL, image_shape="3,16,16", epochs="1000"), {"train": os.path.join(records, "tfrecord", "train")})
        self.start([], {"OMP_NUM_THREADS": "1", "TMPDIR": tmp})
        self.wait_for_output("step=2 ")
        # The inflated shard is unlinked as soon as the host's ranks hold it open.
        self.assertEqual([name for name in os.listdir(tmp) if name.startswith("train-records-")], [])
        pid = self.rank_pid(0)  # the rank that inflated it
        self.assertIsNotNone(pid, self.logs())
        os.kill(pid, signal.SIGKILL)
        code = self.finish()
        self.assert_exit_code(code, 137)
        self.assertEqual(self.failure_lines()[0], "Rank 0 of 2 on host algo-1 was killed by signal 9 (SIGKILL).")
        self.assertEqual(os.listdir(tmp), [], "something was left in TMPDIR")
        self.assert_nothing_left()


    def test_a_read_that_never_returns_is_named_and_holds_nothing_up(self):
        # The image list's first image lies on a file system whose reads never return (a stalled FastFile, EFS
        # or NFS read; tests/support/stalled_fuse.py): rank 0's first batch never comes. After
        # TRAIN_DATA_TIMEOUT_SECONDS the rank names the file and fails; the thread stuck in read() must not
        # keep it from exiting.
        images = self.folder()
        os.makedirs(os.path.join(images, "stalled"))
        lists = os.path.join(self.base, "lists")
        os.makedirs(lists)
        names = ["stalled/stuck.jpg"] + sorted(os.path.relpath(os.path.join(d, f), images)
                                               for d, _, fs in os.walk(images) for f in fs)
        with open(os.path.join(lists, "train.lst"), "w") as f:
            for i, name in enumerate(names):
                f.write(f"{i}\t{i % 2}\t{name}\n")
        self.job(SMALL, {"train": images, "train_lst": lists})
        mountpoint = os.path.join(images, "stalled")
        self.start_command(["unshare", "--mount", "--propagation", "private", sys.executable,
                            os.path.join(REPO, "tests", "support", "stalled_fuse.py"), mountpoint, "stuck.jpg", "2000",
                            "--", test_launch.TRAIN], {"OMP_NUM_THREADS": "1", "TRAIN_DATA_TIMEOUT_SECONDS": "3"})
        self.wait_for_output("allreduce check passed")
        checked_at = time.monotonic()
        code = self.finish(90)
        took = time.monotonic() - checked_at
        print(f"\nthe rank whose read never returned ended the job {took:.1f} s after training began "
              f"(TRAIN_DATA_TIMEOUT_SECONDS=3)", flush=True)
        stuck = os.path.join(self.base, "input", "data", "train", "stalled", "stuck.jpg")  # as the rank names it
        self.assert_failed(code, 124, r"^Rank 0 of 2 on host algo-1 exited with code 124\.$",
                           "no training batch arrived within 3 s", f"still reading {stuck} (a read that has not "
                           "returned for ")
        self.assertLess(took, 3 + 15, self.logs())


    def test_shared_memory_of_a_killed_job_is_removed_by_the_next_one(self):
        # In a mount namespace with a /dev/shm of its own (a holder process keeps it), a job is killed outright
        # mid-training, every process at once, as when a container's PID 1 is SIGKILLed: its launcher's reason
        # folder and Open MPI's segments stay. The next job on the host removes them, and nothing of a live
        # process: a reason folder whose owner runs, and a segment that a process maps.
        holder_pid, shm, inside = test_launch.private_dev_shm(self)
        self.job(SYNTHETIC)
        self.start_command(inside + [test_launch.TRAIN], {"OMP_NUM_THREADS": "1"})
        self.wait_for_output("step=2 ")
        test_launch.kill_processes_with_token(self.token)
        self.finish(30)
        left = sorted(os.listdir(shm))
        self.assertTrue(any(name.startswith("train-reasons-") for name in left), left)
        self.assertTrue(any(name.startswith("vader_segment.") for name in left), left)
        # What a live process holds: its reason folder, a segment it maps.
        host = socket.gethostname()
        live_folder = os.path.join(shm, f"train-reasons-{holder_pid}-live")
        os.mkdir(live_folder)
        with open(f"/proc/{holder_pid}/stat") as f:
            start = f.read().rsplit(")", 1)[1].split()[19]
        with open(os.path.join(live_folder, "owner"), "w") as f:
            f.write(f"pid={holder_pid} start={start} pidns={os.stat('/proc/self/ns/pid').st_ino}")
        live_segment = f"vader_segment.{host}.0.live.0"
        test_launch.map_until_the_end(self, f"/dev/shm/{live_segment}", inside)
        # The next job starts later: everything here is older than the minute a new segment is spared.
        an_hour_ago = time.time() - 3600
        for name in os.listdir(shm):
            os.utime(os.path.join(shm, name), (an_hour_ago, an_hour_ago))
        stale = [name for name in left if name.startswith(("train-reasons-", "vader_segment."))]
        self.job(dict(SYNTHETIC, max_steps="2"))
        self.start_command(inside + [test_launch.TRAIN], {"OMP_NUM_THREADS": "1"})
        self.assert_exit_code(self.finish(120), 0)
        self.assertIn(f"removed {len(stale)} item(s) of shared memory left by jobs that were killed: ",
                      self.stderr_text(), self.logs())
        now = sorted(os.listdir(shm))
        for name in stale:
            self.assertNotIn(name, now)
        self.assertIn(os.path.basename(live_folder), now)
        self.assertIn(live_segment, now)
        self.assert_nothing_left()


# ---------------------------------------------------------------------------------------------------------
# 7. Smaller mismatches


class SmallerMismatches(FaultCase):
    def test_a_pipe_fifo_that_never_appears(self):
        self.job(dict(SMALL, num_training_samples="16", num_classes="2"), modes={"train": "Pipe"})
        code = self.run_job({"TRAIN_DATA_TIMEOUT_SECONDS": "3"})
        fifo = os.path.join(self.base, "input", "data", "train_0")
        self.assert_failed(code, 124, r"^Rank [01] of 2 on host algo-1 exited with code 124\.$",
                           f"the Pipe-mode FIFO {fifo} did not appear within 3 s")

    def test_one_sigterm_a_checkpoint_is_written_and_said(self):
        self.job(SYNTHETIC)
        self.start([], {"OMP_NUM_THREADS": "1"})
        self.wait_for_output("step=2 ")
        self.process.send_signal(signal.SIGTERM)
        code = self.finish()
        self.assert_exit_code(code, 143)
        checkpoint = os.path.join(self.base, "checkpoints", "checkpoint.safetensors")
        self.assertTrue(os.path.exists(checkpoint), self.logs())
        self.assertIn(f"A checkpoint was written after the stop request ({checkpoint})", self.failure_text())
        self.assert_nothing_left()

    def test_two_sigterms_no_checkpoint_is_not_claimed(self):
        # ResNet-101 steps on 224x224 images with 8 images per rank take about 7 s here (and writing its
        # checkpoint about one more): the second signal has mpirun kill the ranks (1 s after its SIGTERM) long
        # before the step that would end in a checkpoint is over, even on a loaded machine (2 images per rank,
        # under 2 s a step, left too thin a margin in CI).
        self.job(dict(SYNTHETIC, num_layers="101", image_shape="3,224,224", mini_batch_size="16"))
        self.start([], {"OMP_NUM_THREADS": "1"})
        self.wait_for_output("step=1 ", timeout=120)
        self.process.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        self.process.send_signal(signal.SIGTERM)
        code = self.finish()
        self.assert_exit_code(code, 143)
        self.assertFalse(os.path.exists(os.path.join(self.base, "checkpoints", "checkpoint.safetensors")), self.logs())
        text = self.failure_text()
        self.assertIn("No checkpoint was written after the stop request (the ranks were ended first)", text)
        self.assertNotIn("A checkpoint was written", text)
        self.assert_nothing_left()

    def test_mpirun_refusing_custom_mpi_options_is_69_naming_the_option(self):
        # mpirun's own exit codes for these are 1 and 134; its usage errors are the launch failing (69).
        for options, refused in (("--bogus-option", 'mpirun does not know the option "--bogus-option"'),
                                 ("--map-by bogus", 'mpirun does not know the mapping policy "bogus"'),
                                 ("-x", 'mpirun found no program "rank" to run (an option before it may lack its '
                                        "value")):
            with self.subTest(options=options):
                shutil.rmtree(os.path.join(self.base, "output"), ignore_errors=True)
                self.job(dict(SYNTHETIC, custom_mpi_options=options))
                self.assert_failed(self.run_job(timeout=60), 69, "^mpirun refused its command line: " + re.escape(refused),
                                   f'The hyperparameter custom_mpi_options adds "{options}" to it')

    def test_a_hyperparameter_too_large_for_the_command_line_is_named(self):
        # `train -- CMD` passes each hyperparameter in SM_HPS, SM_HP_<NAME>, SM_TRAINING_ENV, SM_USER_ARGS and
        # on the command line: one of 200 kB makes exec fail with E2BIG ("Argument list too long").
        self.job({"processes_per_host": "1", "vocabulary": "x" * 200000})
        code = self.run_job(args=["--", "true"], timeout=60)
        self.assert_failed(code, 69, r"^Rank 0 of 1 on host algo-1 exited with code 69\.$",
                           "cannot run true: Argument list too long: the hyperparameter `vocabulary` (200000 bytes) "
                           "makes SM_TRAINING_ENV (", "pass a large value in a file instead")

    def test_out_of_memory_is_said_with_the_ranks_peak_memory(self):
        # A batch far beyond the host's memory: the allocation fails (std::bad_alloc) in every rank.
        self.job(dict(SYNTHETIC, image_shape="3,4096,4096", mini_batch_size="65536"))
        self.assert_failed(self.run_job(timeout=60), 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$",
                           "out of memory: an allocation failed (std::bad_alloc) after this rank's memory had peaked at ",
                           "this host has ", "lower mini_batch_size or image_shape")

    def test_a_rank_killed_by_the_out_of_memory_killer_is_told_so(self):
        # The job runs in a memory cgroup of its own whose limit the first training step exceeds: the kernel's
        # out-of-memory killer ends a rank with SIGKILL, as in a container with too little memory.
        cgroup = memory_cgroup(self, 900 * 2**20)
        self.job(dict(SYNTHETIC, image_shape="3,224,224", mini_batch_size="64"))
        self.start_command(["sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$0"', test_launch.TRAIN],
                           {"OMP_NUM_THREADS": "1"})
        text = self.assert_failed(self.finish(120), 137, r"^Rank [01] of 2 on host algo-1 was killed by signal 9 "
                                  r"\(SIGKILL\)\.$", "The kernel's out-of-memory killer ended ",
                                  "of this container during the job (rank ", "'s memory had peaked at ",
                                  "the container may use 900 MiB", "lower mini_batch_size (64 images per host over 2 "
                                  "ranks) or image_shape")
        print(f"\n{text}", flush=True)

    def test_every_invalid_channel_name_at_once(self):
        self.job(SYNTHETIC, modes={"train data": "File", "ok": "Stream", "../x": "File"})
        validate = subprocess.run([test_launch.TRAIN, "validate", self.base], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=30, env=self.environment())
        self.assertEqual(validate.returncode, 65, validate.stdout)
        for part in ('channel name "../x" is not allowed', 'channel name "train data" is not allowed',
                     'channel "ok": "TrainingInputMode": expected "File", "Pipe" or "FastFile", got a string "Stream"'):
            self.assertIn(part, validate.stdout)

    def test_host_names_differing_only_in_case(self):
        self.job(SYNTHETIC)
        with open(os.path.join(self.base, "input", "config", "resourceconfig.json"), "w") as f:
            json.dump({"current_host": "algo-1", "hosts": ["algo-1", "ALGO-1"]}, f)
        code = self.run_job(timeout=30)
        self.assert_failed(code, 65, r"^The job description is invalid: ",
                           'hosts "algo-1" and "ALGO-1" differ only in letter case')



# ---------------------------------------------------------------------------------------------------------
# Issue 23: what only the ranks found is refused before they start; nonsense TRAIN_* values


class RefusedBeforeLaunch(FaultCase):
    PROBLEMS = (
        'environment variable TRAIN_STEP_TIMEOUT_SECONDS: expected a whole number of seconds from 1 to 9999999 such '
        'as 900, got "0"',
        'channel "train" uses Pipe mode, which streams TFRecord or RecordIO objects, but hyperparameter data_format '
        'is "image_folder"',
        'channel "train" uses Pipe mode, where the data is a stream that train sees only as it trains; set the '
        'hyperparameters num_training_samples (records per epoch across the job) and num_classes',
        'channel "validation" uses Pipe mode; train reads validation data in File or FastFile mode only',
        "hyperparameter `mini_batch_size` gives each of the 2 ranks per host 1 image; batch norm needs at least 2 "
        "per rank, so use at least 4",
    )

    def test_what_only_the_ranks_found_is_listed_by_validate_and_refused_before_a_rank_starts(self):
        self.job(dict(SMALL, data_format="image_folder", mini_batch_size="2"),
                 modes={"train": "Pipe", "validation": "Pipe"})
        env = {"TRAIN_STEP_TIMEOUT_SECONDS": "0"}  # every step would have "timed out"
        validate = subprocess.run([test_launch.TRAIN, "validate", self.base], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=30, env=self.environment(env))
        self.assertEqual(validate.returncode, 65, validate.stdout)
        self.assertIn(f"has {len(self.PROBLEMS)} problems:", validate.stdout)
        for part in self.PROBLEMS:
            self.assertIn(part, validate.stdout)
        started = time.monotonic()
        code = self.run_job(env, timeout=30)
        self.assert_failed(code, 65, r"^The job description is invalid: environment variable "
                                     r"TRAIN_STEP_TIMEOUT_SECONDS: ")
        for part in self.PROBLEMS:  # every one in the log (the failure file holds what fits in 1024 bytes)
            self.assertIn(part, self.stderr_text())
        self.assertNotIn("[rank ", self.stdout_text() + self.stderr_text(), "a rank started")
        self.assertNotIn("mpirun", self.stderr_text(), "mpirun was started")
        self.assertLess(time.monotonic() - started, 10)



class NotRegularFiles(FaultCase):
    def test_an_image_list_naming_dev_zero_or_a_fifo_is_refused_with_its_line(self):
        # Read whole, /dev/zero had the rank killed by the out-of-memory killer; a FIFO without a writer would
        # hold the rank in open(). Both are refused when the list is read, naming the .lst line.
        images = self.folder()
        os.symlink("/dev/zero", os.path.join(images, "ant", "zero.jpg"))
        os.mkfifo(os.path.join(images, "bee", "fifo.jpg"))
        lists = os.path.join(self.base, "lists")
        os.makedirs(lists)
        lines = [f"{i}\t{i % 2}\t{'ant' if i % 2 == 0 else 'bee'}/{i // 2:03d}.jpg" for i in range(16)]
        lines[5:5] = ["16\t0\tant/zero.jpg", "17\t1\tbee/fifo.jpg"]
        with open(os.path.join(lists, "train.lst"), "w") as f:
            f.write("\n".join(lines) + "\n")
        self.job(SMALL, {"train": images, "train_lst": lists})
        started = time.monotonic()
        code = self.run_job(timeout=60)
        lst = os.path.join(self.base, "input", "data", "train_lst", "train.lst")
        offset = sum(len(line) + 1 for line in lines[:5])
        self.assert_failed(code, 65, r"^Rank [01] of 2 on host algo-1 exited with code 65\.$",
                           f'{lst}, byte offset {offset}: the image path "ant/zero.jpg" names a character device, not '
                           f'a regular file')
        self.assertLess(time.monotonic() - started, 30)



class CreatedFiles(FaultCase):
    def test_files_train_writes_honour_the_umask(self):
        # They were written 0644 whatever the umask (a mode forced on the atomic writer's temporary file).
        self.job(dict(SMALL, checkpoint_frequency="1"), {"train": self.folder()})
        env = {"TRAIN_BIN": test_launch.TRAIN, "OMP_NUM_THREADS": "1"}
        self.start_command(["sh", "-c", 'umask 077; exec "$TRAIN_BIN"'], env)
        self.assert_exit_code(self.finish(), 0)
        written = [os.path.join(self.base, "model", "model.safetensors"), os.path.join(self.base, "model", "model.json"),
                   os.path.join(self.base, "checkpoints", "checkpoint.safetensors"), self.output_path("success"),
                   self.output_path(os.path.join("data", "metrics.json"))]
        for path in written:
            self.assertTrue(os.path.exists(path), f"{path} is missing\n{self.logs()}")
            self.assertEqual(oct(os.stat(path).st_mode & 0o777), oct(0o600), path)
        self.assert_nothing_left()



class DeadOutput(FaultCase):
    """stdout (and stderr) a pipe whose reader is gone, as `train | true` leaves it: train was killed by SIGPIPE
    (exit 141, no report at all)."""

    def run_with_dead_pipe(self, args, stderr_too):
        for path in (self.stdout_path, self.stderr_path):
            open(path, "wb").close()  # for logs(): what does not go to the dead pipe
        read_end, write_end = os.pipe()
        os.close(read_end)
        stderr = open(self.stderr_path, "wb") if not stderr_too else write_end
        try:
            process = subprocess.Popen([test_launch.TRAIN] + list(args), stdin=subprocess.DEVNULL, stdout=write_end,
                                       stderr=stderr, env=self.environment({"OMP_NUM_THREADS": "1"}), cwd=self.work)
        finally:
            os.close(write_end)
            if not stderr_too:
                stderr.close()
        self.process = process
        return self.finish()

    def train_log(self):
        if not os.path.exists(self.output_path("train.log")):
            return ""
        with open(self.output_path("train.log")) as f:
            return f.read()

    def test_a_dead_stdout_and_stderr_do_not_end_the_job_and_the_log_goes_to_output_train_log(self):
        self.job(dict(SMALL, checkpoint_frequency="1"), {"train": self.folder()})
        code = self.run_with_dead_pipe([], stderr_too=True)
        self.assertEqual(code, 0, self.train_log())
        self.assertTrue(os.path.exists(self.output_path("success")))
        self.assertFalse(os.path.exists(self.output_path("failure")))
        log = self.train_log()
        for line in ("[train] stdout is a broken pipe (its reader went away); its lines continue in "
                     f"{self.output_path('train.log')}", "[rank 0] step=", "[rank 0] [train] checkpoint written at step 4",
                     "[train] all 2 ranks finished successfully"):
            self.assertIn(line, log)
        self.assert_nothing_left()

    def test_a_dead_stdout_alone_continues_in_the_file_and_stderr_says_so(self):
        self.job(dict(SMALL, checkpoint_frequency="1"), {"train": self.folder()})
        self.assert_exit_code(self.run_with_dead_pipe([], stderr_too=False), 0)
        self.assertIn(f"[train] stdout is a broken pipe (its reader went away); its lines continue in "
                      f"{self.output_path('train.log')}", self.stderr_text())
        self.assertIn("[train] all 2 ranks finished successfully", self.stderr_text())
        self.assertIn("[rank 0] step=", self.train_log())  # the ranks' stdout lines
        self.assertTrue(os.path.exists(self.output_path("success")))

    def test_validate_with_a_dead_stdout_is_not_killed(self):
        self.job(SYNTHETIC)
        self.assert_exit_code(self.run_with_dead_pipe(["validate"], stderr_too=False), 0)
        self.assertIn("is valid", self.stderr_text())
        self.assertFalse(os.path.exists(self.output_path("train.log")))  # validate writes nothing



class SharedJobDirectory(FaultCase):
    def test_a_second_train_on_the_same_job_directory_is_refused_at_once_and_touches_nothing(self):
        # Started 0.3 s apart, two trains corrupted each other: one's checkpoint clean-up deleted the other's
        # temporary file, and output/ held both success and failure.
        self.job(dict(SMALL, checkpoint_frequency="1", epochs="15"), {"train": self.folder()})
        self.start([], {"OMP_NUM_THREADS": "1"})
        first = self.process
        self.wait_for_output("starting (pid ")  # logged once the first holds the job directory's lock
        host = socket.gethostname()
        started = time.monotonic()
        second = subprocess.run([test_launch.TRAIN], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=30, env=self.environment({"OMP_NUM_THREADS": "1"}))
        self.assertEqual(second.returncode, 74, second.stdout)
        self.assertLess(time.monotonic() - started, 5)
        self.assertIn(f"the job directory {self.base} is in use by another train (pid {first.pid} on host {host}, "
                      f"since ", second.stdout)
        self.assertNotIn("starting", second.stdout)
        # The same for a user's command; `train validate` only reads, and is not refused.
        command = subprocess.run([test_launch.TRAIN, "--", "true"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, timeout=30, env=self.environment())
        self.assertEqual(command.returncode, 74, command.stdout)
        validate = subprocess.run([test_launch.TRAIN, "validate"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=30, env=self.environment())
        self.assertEqual(validate.returncode, 0, validate.stdout)
        # The first goes on undisturbed: success alone, every checkpoint whole.
        self.assert_exit_code(self.finish(timeout=300), 0)
        self.assertEqual(sorted(name for name in os.listdir(self.output_path("")) if name in ("success", "failure")),
                         ["success"])
        self.assertEqual([name for name in os.listdir(os.path.join(self.base, "checkpoints")) if ".tmp-" in name], [])
        # Afterwards the directory is free again.
        self.assertEqual(self.run_job(dict(OMP_NUM_THREADS="1"), args=["--", "true"]), 0)
        self.assert_nothing_left()


def main():
    def repeat(args):
        global REPEAT
        REPEAT = args.repeat

    test_launch.run_root_tests(
        __doc__, "test_faults.py", "mount namespaces for full and read-only disks",
        lambda parser: parser.add_argument("--repeat", type=int, default=REPEAT,
                                           help="runs per failure kind (default 20)"),
        repeat)


if __name__ == "__main__":
    main()
