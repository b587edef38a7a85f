"""A training channel on several hosts is indexed once per job when it is FullyReplicated (rank 0 walks the image
folder or reads the record files and sends the index to every rank), once per host when it is ShardedByS3Key or
holds gzip shards (inflated on each host); the real `train` on 2 simulated hosts x 2 ranks
(scripts/simcluster.py), as root.

Checks: the log says which it did (one "indexed here" on the master and "received the index from host algo-1"
from the other host with FullyReplicated; "indexed here" on each host otherwise); and the samples trained are
the same as before: every rank's batches (TRAIN_SAMPLE_LOG: each step's labels, one class per sample) from the
folder and from a TFRecord file, each indexed once per job, equal those of the same samples as a gzip TFRecord
file, whose index every host still builds itself.

With ShardedByS3Key each host holds its own part of the objects: image folders' labels follow the class names
across the hosts (a host without some class folders numbers the others as one folder of all the objects would),
and hosts whose parts are in different formats are refused. A FullyReplicated channel that every host indexes
itself (gzip shards) must hold the same records on every host.

Run: /usr/bin/python3 test_index_once.py --train PATH
"""
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "scripts", "data"))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
sys.path.insert(0, os.path.join(REPO, "tests", "data"))
import simcluster  # noqa: E402
from command_line import paths_and_unittest_argv  # noqa: E402
from make_dataset_records import bytes_feature, example, int64_feature, tfrecord  # noqa: E402
from test_sample_once import SAMPLES, hyperparameters, image_of, read_sample_logs  # noqa: E402

TRAIN = None
JOB_LIMIT = 300
RANKS_PER_HOST = 2


def write_folder(directory, host=None, labels=range(SAMPLES)):
    """One class per sample (c00 ... c28: sorted as the labels), one PNG each."""
    for label in labels:
        os.makedirs(os.path.join(directory, f"c{label:02d}"))
        with open(os.path.join(directory, f"c{label:02d}", "image.png"), "wb") as f:
            f.write(image_of(label))


def records(labels=range(SAMPLES)):
    return b"".join(tfrecord(example({"image/encoded": bytes_feature(image_of(label)),
                                      "image/class/label": int64_feature(label + 1)})) for label in labels)


def write_records(directory, host=None):
    """The same samples in the same order as one TFRecord file."""
    os.makedirs(directory)
    with open(os.path.join(directory, "all.tfrecord"), "wb") as f:
        f.write(records())


def write_gzip_records(directory, host=None, labels=range(SAMPLES)):
    """The same as a gzip TFRecord file."""
    os.makedirs(directory)
    with open(os.path.join(directory, "all.tfrecord.gz"), "wb") as f:
        f.write(gzip.compress(records(labels)))


class IndexOnce(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise AssertionError("simulated hosts need root (network and mount namespaces); run as root")
        cls.work = tempfile.mkdtemp(prefix="index-once-")
        cls.cluster = simcluster.SimCluster(hosts=2, workdir=os.path.join(cls.work, "cluster"))
        cls.cluster.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        shutil.rmtree(cls.work, ignore_errors=True)

    def run_job(self, name, distribution, write_data, succeeds=True):
        """Runs the job with each host's own copy of the data (write_data(folder, host)); returns (the master's
        log, the sample logs), or with succeeds=False (the exit codes, every host's log, the master's failure
        file)."""
        cluster = self.cluster
        simcluster.clear_job(cluster)
        channels = {"train": {"TrainingInputMode": "File", "S3DistributionType": distribution}}
        simcluster.write_sagemaker_job(cluster, dict(hyperparameters(RANKS_PER_HOST), augmentation_type="none"),
                                       channels)
        sample_dirs = []
        for host in cluster.hosts:
            data = os.path.join(self.work, name, host)
            write_data(data, host)
            simcluster.bind_data_channel(cluster, host, "train", data)
            samples = os.path.join(cluster.opt_ml(host), "output", "data", "samples")
            os.makedirs(samples)
            sample_dirs.append(samples)
        env = {"TRAIN_SAMPLE_LOG": "/opt/ml/output/data/samples", "OMP_NUM_THREADS": "1",
               "TRAIN_MASTER_LINGER_SECONDS": "2"}
        processes, logs = {}, {}
        try:
            for host in cluster.hosts:
                with open(os.path.join(cluster.host_dir(host), f"{name}.log"), "wb") as log:
                    processes[host] = cluster.popen(host, [TRAIN, "train"], env=env, stdout=log,
                                                    stderr=subprocess.STDOUT)
            codes = {host: process.wait(timeout=JOB_LIMIT) for host, process in processes.items()}
        finally:
            for process in processes.values():
                if process.poll() is None:
                    process.kill()
                    process.wait()
        for host in cluster.hosts:
            with open(os.path.join(cluster.host_dir(host), f"{name}.log"), errors="replace") as f:
                logs[host] = f.read()
        if not succeeds:
            failure = os.path.join(cluster.opt_ml(cluster.hosts[0]), "output", "failure")
            if not os.path.exists(failure):
                return codes, logs, ""
            with open(failure, errors="replace") as f:
                return codes, logs, f.read()
        self.assertEqual(set(codes.values()), {0}, f"{name}: exit codes {codes}\n" +
                         "\n".join(f"--- {h}:\n{t[-3000:]}" for h, t in logs.items()))
        return logs[cluster.hosts[0]], read_sample_logs(sample_dirs)

    def assert_indexed_once_per_job(self, log, how):
        indexed = re.findall(r"training data: indexed here, on host (\S+?),", log)
        received = re.findall(r"training data: received the index from host (\S+) ", log)
        self.assertEqual(indexed, ["algo-1"], f"one host indexes:\n{log[-3000:]}")
        self.assertEqual(received, ["algo-1"], f"the other host receives its index:\n{log[-3000:]}")
        self.assertIn(how, log)

    def test_fully_replicated_channel_is_indexed_once_per_job(self):
        log, folder_samples = self.run_job("folder-replicated", "FullyReplicated", write_folder)
        self.assert_indexed_once_per_job(log, "FullyReplicated: walked once per job")
        log, record_samples = self.run_job("records-replicated", "FullyReplicated", write_records)
        self.assert_indexed_once_per_job(log, "FullyReplicated: read once per job")

        log, per_host_samples = self.run_job("gzip-records-replicated", "FullyReplicated", write_gzip_records)
        indexed = re.findall(r"training data: indexed here, on host (\S+?),", log)
        self.assertEqual(sorted(indexed), ["algo-1", "algo-2"], f"gzip shards: each host indexes:\n{log[-3000:]}")
        self.assertNotIn("received the index", log)

        self.assertEqual(sorted(per_host_samples), list(range(2 * RANKS_PER_HOST)))
        for rank in sorted(per_host_samples):
            for what, samples in (("the folder", folder_samples), ("the TFRecord file", record_samples)):
                self.assertEqual(samples.get(rank), per_host_samples[rank],
                                 f"rank {rank}: the batches from {what} indexed once per job differ from the same "
                                 f"samples indexed on every host")

    def test_sharded_folder_is_walked_on_every_host(self):
        log, _ = self.run_job("folder-sharded", "ShardedByS3Key", write_folder)
        indexed = re.findall(r"training data: indexed here, on host (\S+?),", log)
        self.assertEqual(sorted(indexed), ["algo-1", "algo-2"], f"each host walks its own part:\n{log[-3000:]}")
        self.assertNotIn("received the index", log)

    # ShardedByS3Key: each host holds its own part of the objects, and so perhaps not every class folder.

    def test_sharded_folders_labels_follow_the_class_names_on_every_host(self):
        # algo-1 holds classes c00-c19, algo-2 c10-c28: one folder of all the objects would number them 0-28, and
        # so must the job (algo-2 alone would call c10 class 0).
        parts = {"algo-1": range(0, 20), "algo-2": range(10, SAMPLES)}
        log, samples = self.run_job("folder-sharded-classes", "ShardedByS3Key",
                                    lambda directory, host: write_folder(directory, labels=parts[host]))
        self.assertIn(f"training data: ShardedByS3Key: host algo-2 holds 19 of the job's {SAMPLES} classes", log)
        self.assertIn(f"training data: ShardedByS3Key: host algo-1 holds 20 of the job's {SAMPLES} classes", log)
        for rank, entries in samples.items():
            host = "algo-1" if rank < RANKS_PER_HOST else "algo-2"
            seen = {label for entry in entries for label in entry[3]}
            self.assertTrue(seen, f"rank {rank} logged no samples")
            self.assertLessEqual(seen, set(parts[host]), f"rank {rank} on {host}: labels {sorted(seen)} are not "
                                                         f"the places of its class folders among all the hosts'")
        self.assertEqual({label for entries in samples.values() for entry in entries for label in entry[3]},
                         set(range(SAMPLES)))

    def test_replicated_gzip_shards_that_differ_between_hosts_are_refused(self):
        # Indexed on every host (each inflates its own copy), a FullyReplicated channel must be the same on all:
        # algo-2's copy lacks the last record.
        def write(directory, host):
            write_gzip_records(directory, labels=range(SAMPLES if host == "algo-1" else SAMPLES - 1))
        codes, logs, failure = self.run_job("gzip-replicated-differing", "FullyReplicated", write, succeeds=False)
        self.assertEqual(codes["algo-1"], 65, f"the job must be refused as invalid data: {codes}\n" +
                         "\n".join(f"--- {h}:\n{t[-3000:]}" for h, t in logs.items()))
        self.assertRegex(failure, r"FullyReplicated: the training channel holds other records on host algo-[12] than "
                                  r"on another host \(2[89] records in ")

    def test_sharded_hosts_holding_different_formats_are_refused(self):
        def write(directory, host):
            (write_folder if host == "algo-1" else write_records)(directory)
        codes, logs, failure = self.run_job("mixed-formats", "ShardedByS3Key", write, succeeds=False)
        self.assertEqual(codes["algo-1"], 65, f"the job must be refused as invalid data: {codes}\n" +
                         "\n".join(f"--- {h}:\n{t[-3000:]}" for h, t in logs.items()))
        self.assertIn("ShardedByS3Key: the hosts' training channels hold data of different formats", failure,
                      "\n".join(f"--- {h}:\n{t[-3000:]}" for h, t in logs.items()))
        self.assertRegex(failure, r"this host \(algo-[12]\) found (image_folder|tfrecord) in ")
        self.assertRegex(failure, r"another host (image_folder|tfrecord)")


if __name__ == "__main__":
    (TRAIN,), argv = paths_and_unittest_argv("--train")
    unittest.main(argv=argv, verbosity=2)
