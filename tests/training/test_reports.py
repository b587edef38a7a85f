"""What a training job reports besides its log, with the real `train` on this host (CPU ranks, mpirun):

- TensorBoard event files, read back by TensorBoard's own reader (PyPI's tensorboard, which
  scripts/setup.sh installs into build-python/): every scalar of every log line and validation, equal to
  the logged figures; tensorboardoutputconfig.json's LocalPath moves them;
- metrics.json in output/data: each epoch's figures and the final ones, equal to the logged figures;
- checkpointconfig.json's LocalPath moves the checkpoints;
- a tuning job's platform keys are accepted;
- a per-rank timing line at every log line, naming ranks and their host;
- a rank slowed down (stopped 3/4 of the time by this test) is named in a straggler warning; no other rank.

Run: /usr/bin/python3 test_reports.py --train PATH --tensorboard-python PATH
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

TRAIN = None
TB_PYTHON = None
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
from command_line import paths_and_unittest_argv  # noqa: E402
JOB_LIMIT = 600

# Reads every scalar of an event folder with TensorBoard's EventAccumulator; prints {tag: [[step, value]]}.
READ_EVENTS = """
import json, sys
from tensorboard.backend.event_processing import event_accumulator as ea
acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.SCALARS: 0})
acc.Reload()
print(json.dumps({tag: [[e.step, e.value] for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}))
"""


def write_config(base, name, value):
    config = os.path.join(base, "input", "config")
    os.makedirs(config, exist_ok=True)
    with open(os.path.join(config, name), "w") as f:
        json.dump(value, f)


def run_train(base, env=None, during=None):
    full_env = dict(os.environ, SAGEMAKER_BASE_DIR=base, **(env or {}))
    for name in list(full_env):
        if name.startswith(("OMPI_", "PMIX_", "SM_")):
            del full_env[name]
    process = subprocess.Popen([TRAIN], env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    helper = None
    if during:
        helper = threading.Thread(target=during, args=(process,), daemon=True)
        helper.start()
    try:
        stdout, stderr = process.communicate(timeout=JOB_LIMIT)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        raise AssertionError(f"train ran longer than {JOB_LIMIT} s:\n{stderr[-3000:]}")
    if helper:
        helper.join(timeout=10)
    return process.returncode, stdout, stderr


def rank_pid(base, rank):
    """The pid of `train rank` with OMPI_COMM_WORLD_RANK=rank in the job whose SAGEMAKER_BASE_DIR is `base`, or
    None. The job's folder tells it apart from the ranks of other tests' jobs that ctest -j runs beside it."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 2 and argv[0].endswith(b"train") and argv[1] == b"rank" and \
                f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ and \
                f"SAGEMAKER_BASE_DIR={base}".encode() in environ:
            return int(entry)
    return None


class Reports(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory(prefix="train-reports-")
        cls.data = os.path.join(cls.work.name, "fashion")
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "make_fashion_mnist_folder.py"), "--limit", "320",
                        cls.data], check=True, stdout=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def test_tensorboard_metrics_json_and_moved_folders(self):
        base = os.path.join(self.work.name, "job")
        write_config(base, "resourceconfig.json", {"current_host": "algo-1", "hosts": ["algo-1"]})
        write_config(base, "hyperparameters.json", {
            "num_layers": "18", "image_shape": "3,28,28", "mini_batch_size": "32", "processes_per_host": "2",
            "epochs": "2", "learning_rate": "0.1", "augmentation_type": "none",
            "_tuning_objective_metric": "\"validation:top1\"", "sagemaker_job_name": "\"reports-test\"",
            "sagemaker_estimator_class_name": "\"Estimator\""})
        write_config(base, "inputdataconfig.json", {"train": {"TrainingInputMode": "File"},
                                                     "validation": {"TrainingInputMode": "File"}})
        write_config(base, "checkpointconfig.json", {"LocalPath": "/opt/ml/moved-checkpoints", "S3Uri": "s3://b/c"})
        write_config(base, "tensorboardoutputconfig.json", {"LocalPath": "/opt/ml/moved-tensorboard"})
        os.makedirs(os.path.join(base, "input", "data"))
        for channel in ("train", "validation"):
            os.symlink(os.path.join(self.data, channel), os.path.join(base, "input", "data", channel))
        code, stdout, stderr = run_train(base, {"OMP_NUM_THREADS": "1"})
        self.assertEqual(code, 0, stderr[-4000:])

        # The logged figures.
        steps = {int(m[1]): (float(m[2]), float(m[3]), float(m[4]), float(m[5])) for m in re.finditer(
            r"step=(\d+) epoch=\d+ loss=([0-9.eE+-]+) train_top1=([0-9.]+) lr=([0-9.eE+-]+) images_per_sec=([0-9.]+)",
            stdout)}
        validations = {int(m[1]): (float(m[2]), float(m[3])) for m in re.finditer(
            r"epoch=(\d+) validation_top1=([0-9.]+) validation_top5=([0-9.]+)", stdout)}
        self.assertGreater(len(steps), 5, stdout)
        self.assertEqual(sorted(validations), [0, 1], stdout)

        # Checkpoints and TensorBoard files where the configs put them (under SAGEMAKER_BASE_DIR).
        self.assertTrue(os.path.isfile(os.path.join(base, "moved-checkpoints", "checkpoint.safetensors")))
        self.assertFalse(os.path.exists(os.path.join(base, "checkpoints")))
        self.assertFalse(os.path.exists(os.path.join(base, "output", "tensorboard")))
        events = os.path.join(base, "moved-tensorboard")
        files = os.listdir(events)
        self.assertEqual(len(files), 1, files)
        self.assertRegex(files[0], r"^events\.out\.tfevents\.\d+\.algo-1$")

        # TensorBoard's own reader sees every logged figure.
        read = subprocess.run([TB_PYTHON, "-c", READ_EVENTS, events], capture_output=True, text=True, timeout=120)
        self.assertEqual(read.returncode, 0, read.stderr)
        scalars = {tag: dict((step, value) for step, value in points) for tag, points in json.loads(read.stdout).items()}
        for tag in ("train/loss", "train/top1", "train/learning_rate", "train/images_per_sec", "time/step_seconds",
                    "time/data_wait_seconds", "validation/top1", "validation/top5"):
            self.assertIn(tag, scalars)
        self.assertEqual(sorted(scalars["train/loss"]), sorted(steps))
        for step, (loss, top1, lr, images_per_sec) in steps.items():
            self.assertAlmostEqual(scalars["train/loss"][step], loss, places=5)
            self.assertAlmostEqual(scalars["train/top1"][step], top1, places=4)
            self.assertAlmostEqual(scalars["train/learning_rate"][step], lr, delta=1e-6 + 1e-5 * lr)
            self.assertAlmostEqual(scalars["train/images_per_sec"][step], images_per_sec, delta=0.06 + 1e-5 * images_per_sec)
            self.assertGreater(scalars["time/step_seconds"][step], 0)
        last_steps = sorted(scalars["validation/top1"])
        self.assertEqual(len(last_steps), 2)
        for epoch, step in enumerate(last_steps):
            self.assertAlmostEqual(scalars["validation/top1"][step], validations[epoch][0], places=4)
            self.assertAlmostEqual(scalars["validation/top5"][step], validations[epoch][1], places=4)

        # metrics.json: each epoch and the end.
        with open(os.path.join(base, "output", "data", "metrics.json")) as f:
            metrics = json.load(f)
        self.assertEqual([e["epoch"] for e in metrics["epochs"]], [0, 1])
        for entry in metrics["epochs"]:
            self.assertTrue(entry["complete"])
            self.assertAlmostEqual(entry["validation_top1"], validations[entry["epoch"]][0], places=4)
            self.assertAlmostEqual(entry["validation_top5"], validations[entry["epoch"]][1], places=4)
            self.assertGreaterEqual(entry["images"], 320)  # every image once, plus DistributedSampler's padding
            self.assertGreater(entry["images_per_sec"], 0)
        final = metrics["final"]
        self.assertEqual(final["status"], "finished")
        self.assertEqual(final["step"], max(steps))
        self.assertEqual(final["epochs_completed"], 2)
        self.assertAlmostEqual(final["validation_top1"], validations[1][0], places=4)
        self.assertGreaterEqual(final["wall_time_seconds"], final["training_seconds"])
        self.assertEqual(metrics["job"]["ranks"], 2)

        # A timing line after every step line, each naming the slowest and fastest rank and their host.
        timing = re.findall(r"timing step=(\d+) step_time max=[0-9.]+ \(rank [01] on algo-1\) min=[0-9.]+ "
                            r"\(rank [01] on algo-1\) data_wait max=[0-9.]+ \(rank [01] on algo-1\) min=[0-9.]+ "
                            r"\(rank [01] on algo-1\) reduction_wait max=[0-9.]+ \(rank [01] on algo-1\) "
                            r"min=[0-9.]+ \(rank [01] on algo-1\)", stdout)
        self.assertEqual(sorted(int(step) for step in timing), sorted(steps), stdout)

    def test_a_slow_rank_is_named_a_straggler(self):
        base = os.path.join(self.work.name, "straggler")
        write_config(base, "resourceconfig.json", {"current_host": "algo-1", "hosts": ["algo-1"]})
        write_config(base, "hyperparameters.json", {
            "num_layers": "18", "image_shape": "3,32,32", "data_format": "synthetic", "num_classes": "10",
            "mini_batch_size": "12", "processes_per_host": "3", "max_steps": "60", "checkpoint_frequency": "0"})
        stop = threading.Event()

        def slow_down_rank_2(process):
            """Stops rank 2 three quarters of the time once it runs (its own work then takes 4x as long). The
            cycle (40 ms) is short against a step, so the stops fall on its own work in every step, not on
            whole waits for the others, whatever the machine's load does to the phases."""
            pid = None
            while pid is None and process.poll() is None:
                pid = rank_pid(base, 2)
                time.sleep(0.05)
            while process.poll() is None and not stop.is_set():
                try:
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(0.03)
                    os.kill(pid, signal.SIGCONT)
                    time.sleep(0.01)
                except ProcessLookupError:
                    return

        env = {"OMP_NUM_THREADS": "1", "TRAIN_STRAGGLER_INTERVALS": "2", "TRAIN_STRAGGLER_FACTOR": "1.5"}
        try:
            code, stdout, stderr = run_train(base, env, during=slow_down_rank_2)
        finally:
            stop.set()
        self.assertEqual(code, 0, stderr[-4000:])
        warnings = re.findall(r"warning: straggler: rank (\d+) on host (\S+) has been slower than the median rank "
                              r"for (\d+) log intervals in a row", stderr)
        self.assertTrue(warnings, f"no straggler named\n{stdout[-3000:]}\n{stderr[-3000:]}")
        self.assertEqual({(rank, host) for rank, host, _ in warnings}, {("2", "algo-1")}, stderr[-3000:])
        print(f"straggler warnings: {len(warnings)}", flush=True)


if __name__ == "__main__":
    (TRAIN, TB_PYTHON), argv = paths_and_unittest_argv("--train", "--tensorboard-python")
    if not os.path.exists(TB_PYTHON):
        sys.exit(f"{TB_PYTHON} is missing: scripts/setup.sh installs TensorBoard's reader there")
    unittest.main(argv=argv, verbosity=2)
