"""Every sample is trained on exactly once per epoch across the whole job, in File, FastFile and Pipe mode,
for FullyReplicated and ShardedByS3Key channels, with 1, 3 and 8 ranks: the real `train`, with
TRAIN_SAMPLE_LOG making every rank list the labels of each batch it trained on.

The data set has one class per sample, so a label names its sample. Its size (29, a prime) is divisible by
no rank count, so the last partial batch and DistributedSampler's padding always occur. Per epoch the
checks are: every rank ran the same number of steps; the samples not marked as padding are the data set,
each exactly once; the padding is what docs/data.md documents (File and FastFile: ceil(n/R)*R - n repeats
with FullyReplicated; with ShardedByS3Key a host's ranks also repeat samples up to the fullest host's
share; Pipe mode: the same per stream, plus whole repeated batches on ranks whose host's stream ended
before another host's).

Several hosts run on simulated hosts (scripts/simcluster.py): root only. Pipe mode's FIFOs are fed by
tests/support/pipe_feeder.py playing SageMaker's part.

Run: /usr/bin/python3 test_sample_once.py --train PATH
"""
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "scripts", "data"))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import simcluster  # noqa: E402
from make_dataset_records import bytes_feature, example, int64_feature, tfrecord  # noqa: E402
from make_fashion_mnist_folder import png_gray8  # noqa: E402
from command_line import paths_and_unittest_argv  # noqa: E402
from pipe_feeder import PipeFeeder  # noqa: E402

TRAIN = None
SAMPLES = 29
EPOCHS = 2
PER_RANK_BATCH = 2
SIDE = 16
JOB_LIMIT = 300
MODES = ("File", "FastFile", "Pipe")


def image_of(label):
    """A 16x16 gray PNG that differs per label."""
    pixels = bytes((label * 37 + x * 5 + y * 11) % 256 for y in range(SIDE) for x in range(SIDE))
    return png_gray8(SIDE, SIDE, pixels)


def write_shards(directory, labels, shards):
    """TFRecord files of tf.train.Example records (1-based labels, as the ImageNet scripts write them)."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for shard in range(shards):
        part = labels[shard::shards]
        data = b"".join(tfrecord(example({"image/encoded": bytes_feature(image_of(label)),
                                          "image/class/label": int64_feature(label + 1)})) for label in part)
        path = os.path.join(directory, f"part-{shard:05d}.tfrecord")
        with open(path, "wb") as f:
            f.write(data)
        paths.append(path)
    return paths


def hyperparameters(ranks_per_host):
    return {"num_layers": "18", "image_shape": f"3,{SIDE},{SIDE}", "num_classes": str(SAMPLES),
            "num_training_samples": str(SAMPLES), "mini_batch_size": str(PER_RANK_BATCH * ranks_per_host),
            "processes_per_host": str(ranks_per_host), "epochs": str(EPOCHS), "checkpoint_frequency": "0",
            "augmentation_type": "none", "seed": "5"}


def channel_config(mode, distribution):
    return {"train": {"TrainingInputMode": mode, "S3DistributionType": distribution}}


def expected_padding(samples, ranks):
    """Repeats per epoch with every rank sharing the data: DistributedSampler's ceil(n/R)*R - n, plus one
    per rank whose last batch would hold a single image (completed to two for batch norm)."""
    share = -(-samples // ranks)
    single = share % PER_RANK_BATCH == 1
    return share * ranks - samples + (ranks if single else 0)


LINE = re.compile(r"epoch=(\d+) step=(\d+) padding=([01]) labels=([\d,]*) samples=[-\d,]* repeats=([01,]*)$")


def read_sample_logs(directories):
    """{rank: [(epoch, step, padding, labels, repeats)]} from the rank-R.txt files in `directories`."""
    logs = {}
    for directory in directories:
        for name in os.listdir(directory):
            match = re.fullmatch(r"rank-(\d+)\.txt", name)
            if not match:
                continue
            entries = []
            with open(os.path.join(directory, name)) as f:
                for line in f:
                    parsed = LINE.match(line.strip())
                    if not parsed:
                        raise AssertionError(f"{name}: unexpected line {line!r}")
                    epoch, step, padding, labels, repeats = parsed.groups()
                    entries.append((int(epoch), int(step), padding == "1", [int(x) for x in labels.split(",")],
                                    [r == "1" for r in repeats.split(",")]))
            logs[int(match.group(1))] = entries
    return logs


class SampleOnce(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="sample-once-")
        cls.labels = list(range(SAMPLES))
        cls.all_shards = write_shards(os.path.join(cls.work, "all"), cls.labels, 4)
        cls.figures = []

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)
        for line in cls.figures:
            print(line)

    # -- checks ------------------------------------------------------------------------------------------

    def check_epochs(self, logs, ranks, label_sets_by_rank, what):
        """label_sets_by_rank: rank -> the labels its host holds (all of them unless ShardedByS3Key)."""
        self.assertEqual(sorted(logs), list(range(ranks)), f"{what}: a sample log per rank")
        for epoch in range(EPOCHS):
            steps = {rank: [e for e in entries if e[0] == epoch] for rank, entries in logs.items()}
            counts = {rank: len(entries) for rank, entries in steps.items()}
            self.assertEqual(len(set(counts.values())), 1, f"{what}, epoch {epoch}: steps per rank differ: {counts}")
            used = collections.Counter()
            for rank, entries in steps.items():
                for _, _, padding, labels, repeats in entries:
                    for label, repeat in zip(labels, repeats):
                        self.assertIn(label, label_sets_by_rank[rank],
                                      f"{what}, epoch {epoch}: rank {rank} trained on a sample of another host")
                        if not padding and not repeat:
                            used[label] += 1
            missing = sorted(set(self.labels) - set(used))
            twice = sorted(label for label, count in used.items() if count > 1)
            self.assertFalse(missing or twice, f"{what}, epoch {epoch}: samples missing {missing}, used more than "
                                               f"once (unmarked) {twice}")

    def expect_padding(self, logs, epoch, expected, what):
        marked = sum(sum(repeats) for entries in logs.values() for e, _, padding, _, repeats in entries
                     if e == epoch and not padding)
        self.assertEqual(marked, expected, f"{what}, epoch {epoch}: padding repeats")

    # -- one host ------------------------------------------------------------------------------------------

    def run_local(self, mode, ranks, distribution="FullyReplicated"):
        base = os.path.join(self.work, f"local-{mode}-{ranks}-{distribution}")
        shutil.rmtree(base, ignore_errors=True)
        config = os.path.join(base, "input", "config")
        data = os.path.join(base, "input", "data")
        samples = os.path.join(base, "samples")
        for directory in (config, data, samples):
            os.makedirs(directory)
        with open(os.path.join(config, "resourceconfig.json"), "w") as f:
            json.dump({"current_host": "algo-1", "hosts": ["algo-1"]}, f)
        with open(os.path.join(config, "hyperparameters.json"), "w") as f:
            json.dump(hyperparameters(ranks), f)
        with open(os.path.join(config, "inputdataconfig.json"), "w") as f:
            json.dump(channel_config(mode, distribution), f)
        feeder = None
        if mode == "Pipe":
            feeder = PipeFeeder(data, "train", self.all_shards, epochs=EPOCHS)
            feeder.start()
        else:
            shutil.copytree(os.path.dirname(self.all_shards[0]), os.path.join(data, "train"))
        env = dict(os.environ, SAGEMAKER_BASE_DIR=base, OMP_NUM_THREADS="1", TRAIN_SAMPLE_LOG=samples,
                   TRAIN_DATA_TIMEOUT_SECONDS="60")
        started = time.monotonic()
        try:
            result = subprocess.run([TRAIN], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    timeout=JOB_LIMIT)
        finally:
            if feeder:
                feeder.stop()
                feeder.join(10)
        what = f"{mode}, {distribution}, {ranks} rank(s) on 1 host"
        self.assertEqual(result.returncode, 0, f"{what}:\n{result.stdout[-4000:]}")
        self.figures.append(f"{what}: {time.monotonic() - started:.1f} s")
        logs = read_sample_logs([samples])
        self.check_epochs(logs, ranks, {rank: set(self.labels) for rank in range(ranks)}, what)
        for epoch in range(EPOCHS):
            self.expect_padding(logs, epoch, expected_padding(SAMPLES, ranks), what)
        return logs

    def test_one_host_every_mode(self):
        for mode in MODES:
            for ranks in (1, 3, 8):
                with self.subTest(mode=mode, ranks=ranks):
                    self.run_local(mode, ranks)

    def test_one_host_sharded_by_s3_key(self):
        # On one host ShardedByS3Key shards over the host's ranks, which are all the ranks.
        for mode in MODES:
            with self.subTest(mode=mode):
                self.run_local(mode, 3, "ShardedByS3Key")

    def test_pipe_resume_after_sigterm_is_bit_identical(self):
        """SIGTERM mid-epoch in Pipe mode: a checkpoint; the restarted job (SageMaker streams fresh FIFOs from
        _0 again) skips what was trained in that epoch and ends with the uninterrupted run's weights."""
        def job(name):
            base = os.path.join(self.work, name)
            shutil.rmtree(base, ignore_errors=True)
            for sub in ("input/config", "input/data"):
                os.makedirs(os.path.join(base, sub))
            with open(os.path.join(base, "input", "config", "resourceconfig.json"), "w") as f:
                json.dump({"current_host": "algo-1", "hosts": ["algo-1"]}, f)
            with open(os.path.join(base, "input", "config", "hyperparameters.json"), "w") as f:
                json.dump(dict(hyperparameters(2), epochs="3", augmentation_type="crop"), f)
            with open(os.path.join(base, "input", "config", "inputdataconfig.json"), "w") as f:
                json.dump(channel_config("Pipe", "FullyReplicated"), f)
            return base

        def start(base):
            data = os.path.join(base, "input", "data")
            for name in os.listdir(data):  # a new job gets new FIFOs, numbered from 0
                os.remove(os.path.join(data, name))
            feeder = PipeFeeder(data, "train", self.all_shards, epochs=3)
            feeder.start()
            env = dict(os.environ, SAGEMAKER_BASE_DIR=base, OMP_NUM_THREADS="1", TRAIN_DATA_TIMEOUT_SECONDS="60")
            process = subprocess.Popen([TRAIN], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            return feeder, process

        def finish(feeder, process, stop_at=None):
            seen = []
            try:
                for line in process.stdout:
                    seen.append(line)
                    if stop_at and stop_at in line:
                        process.send_signal(signal.SIGTERM)
                        break
                seen.extend(process.stdout.readlines())
                code = process.wait(timeout=JOB_LIMIT)
            finally:
                feeder.stop()
                feeder.join(10)
                if process.poll() is None:
                    process.kill()
                    process.wait()
            return code, "".join(seen)

        reference = job("pipe-reference")
        code, output = finish(*start(reference))
        self.assertEqual(code, 0, output)
        interrupted = job("pipe-interrupted")
        code, output = finish(*start(interrupted), stop_at="step=4 ")
        self.assertEqual(code, 143, output)
        self.assertIn("stopped at step", output)
        code, output = finish(*start(interrupted))
        self.assertEqual(code, 0, output)
        self.assertIn("resuming from", output)
        with open(os.path.join(reference, "model", "model.safetensors"), "rb") as f:
            expected = f.read()
        with open(os.path.join(interrupted, "model", "model.safetensors"), "rb") as f:
            self.assertEqual(f.read(), expected, "the resumed Pipe-mode run's weights differ from the uninterrupted run's")

    # -- several hosts -------------------------------------------------------------------------------------

    def run_cluster(self, cluster, mode, distribution, ranks_per_host, host_labels):
        """host_labels: host -> the labels its channel holds (every label for FullyReplicated)."""
        hosts = cluster.hosts
        what = f"{mode}, {distribution}, {len(hosts)} hosts x {ranks_per_host} ranks"
        for host in hosts:
            opt_ml = cluster.opt_ml(host)
            if os.path.ismount(os.path.join(opt_ml, "input", "data", "train")):
                cluster.run(host, ["umount", "/opt/ml/input/data/train"], check=True)
            for sub in ("input", "model", "output", "checkpoints"):
                shutil.rmtree(os.path.join(opt_ml, sub), ignore_errors=True)
        simcluster.write_sagemaker_job(cluster, hyperparameters(ranks_per_host), channel_config(mode, distribution))
        feeders = []
        sample_dirs = []
        for host in hosts:
            opt_ml = cluster.opt_ml(host)
            samples = os.path.join(opt_ml, "output", "data", "samples")
            os.makedirs(samples)
            sample_dirs.append(samples)
            shards = write_shards(os.path.join(self.work, what.replace(" ", "_"), host), host_labels[host], 2)
            if mode == "Pipe":
                feeder = PipeFeeder(os.path.join(opt_ml, "input", "data"), "train", shards, epochs=EPOCHS)
                feeder.start()
                feeders.append(feeder)
            else:
                simcluster.bind_data_channel(cluster, host, "train", os.path.dirname(shards[0]))
        # The master's linger after the ranks (default 5 s) shortened: a worker sees its ranks end within
        # its 0.5 s poll, and a dozen jobs here would otherwise sleep a minute in all.
        env = {"TRAIN_SAMPLE_LOG": "/opt/ml/output/data/samples", "TRAIN_DATA_TIMEOUT_SECONDS": "60",
               "OMP_NUM_THREADS": "1", "TRAIN_MASTER_LINGER_SECONDS": "2"}
        started = time.monotonic()
        processes, logs_out = {}, {}
        try:
            for host in hosts:
                log = open(os.path.join(cluster.host_dir(host), f"train-{mode}.log"), "wb")
                processes[host] = cluster.popen(host, [TRAIN, "train"], env=env, stdout=log, stderr=subprocess.STDOUT)
                log.close()
            codes = {host: process.wait(timeout=JOB_LIMIT) for host, process in processes.items()}
        finally:
            for feeder in feeders:
                feeder.stop()
                feeder.join(10)
            for host, process in processes.items():
                if process.poll() is None:
                    process.kill()
                    process.wait()
        for host in hosts:
            with open(os.path.join(cluster.host_dir(host), f"train-{mode}.log"), errors="replace") as f:
                logs_out[host] = f.read()
        self.assertEqual(set(codes.values()), {0}, f"{what}: exit codes {codes}\n" +
                         "\n".join(f"--- {h}:\n{t[-3000:]}" for h, t in logs_out.items()))
        self.figures.append(f"{what}: {time.monotonic() - started:.1f} s")
        logs = read_sample_logs(sample_dirs)
        ranks = len(hosts) * ranks_per_host
        rank_labels = {rank: set(host_labels[hosts[rank // ranks_per_host]]) for rank in range(ranks)}
        self.check_epochs(logs, ranks, rank_labels, what)
        return logs

    def uneven_split(self, hosts):
        """ShardedByS3Key gives hosts different numbers of samples: here 12, 10 and 7 (or 16 and 13)."""
        cuts = {2: [16], 3: [12, 22]}[len(hosts)]
        bounds = [0] + cuts + [SAMPLES]
        return {host: self.labels[bounds[i]:bounds[i + 1]] for i, host in enumerate(hosts)}

    def test_several_hosts(self):
        if os.geteuid() != 0:
            self.fail("simulated hosts need root (network and mount namespaces); run the suite as root")
        for host_count, ranks_per_host in ((3, 1), (2, 4)):
            with simcluster.SimCluster(hosts=host_count, workdir=os.path.join(self.work, f"cluster{host_count}")) \
                    as cluster:
                everything = {host: self.labels for host in cluster.hosts}
                split = self.uneven_split(cluster.hosts)
                for mode in MODES:
                    with self.subTest(mode=mode, distribution="ShardedByS3Key", hosts=host_count):
                        logs = self.run_cluster(cluster, mode, "ShardedByS3Key", ranks_per_host, split)
                        fullest = max(len(labels) for labels in split.values())
                        per_rank = -(-fullest // ranks_per_host)
                        steps = -(-per_rank // PER_RANK_BATCH)
                        for rank, entries in logs.items():
                            self.assertEqual(len([e for e in entries if e[0] == 0]), steps,
                                             f"{mode}: rank {rank} should run the fullest host's {steps} steps")
                    with self.subTest(mode=mode, distribution="FullyReplicated", hosts=host_count):
                        logs = self.run_cluster(cluster, mode, "FullyReplicated", ranks_per_host, everything)
                        for epoch in range(EPOCHS):
                            self.expect_padding(logs, epoch, expected_padding(SAMPLES, host_count * ranks_per_host),
                                                f"{mode}, FullyReplicated")


if __name__ == "__main__":
    (TRAIN,), argv = paths_and_unittest_argv("--train")
    unittest.main(argv=argv, verbosity=2)
