"""Multi-host jobs with the real `train` on simulated hosts (scripts/simcluster.py: one network, UTS and
mount namespace per host, a real sshd on each, each host's own /opt/ml), started as a container starts it.

- 3 hosts x 2 ranks train ResNet-50 for a few steps: one model, identical parameters on every rank, and the
  same model as one host with 6 ranks (same seed, same data);
- the same through AWS Batch variables, children starting in random order and one 10 s late;
- heterogeneous clusters: only the distribution's instance groups run ranks, the other hosts wait for the
  job's end and exit 0;
- faults, each ending in bounded time with the documented exit code on every host, a precise failure file,
  and no process of the job left on any host: a rank killed on a worker, a worker that never starts, the
  master killed, SIGTERM to the master (checkpoint, then a restarted job resumes), a wrong network
  interface, a host name that resolves late, a hanging rank (the step timeout ends it);
- strangers: a host on the job's network that is not one of its hosts (holding the image's key) cannot log
  in to the job's hosts, nothing answers ssh off the job's interface, and its AWS Batch registrations are
  refused while the job goes on.

Runs as root (namespaces, sshd). Run: /usr/bin/python3 test_multihost.py --train PATH
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import simcluster  # noqa: E402
from command_line import paths_and_unittest_argv  # noqa: E402
from safetensors_numpy import read_safetensors  # noqa: E402

TRAIN = None

# ResNet-50 on small synthetic images: the real model, a few seconds per step here.
RESNET50_JOB = {"num_layers": 50, "image_shape": "3,32,32", "data_format": "synthetic", "num_classes": 10,
                "mini_batch_size": 4, "processes_per_host": 2, "max_steps": 2, "seed": 11}
# For faults mid-training: small and long enough to be interrupted.
LONG_JOB = {"num_layers": 18, "image_shape": "3,32,32", "data_format": "synthetic", "num_classes": 10,
            "mini_batch_size": 4, "processes_per_host": 2, "max_steps": 400, "seed": 3}
# Every wait in these tests; the job's own bounds are much shorter.
JOB_LIMIT = 240
# Float tolerance between the 3-host and the 1-host model: only the order of the allreduce's sums may
# differ between the two.
MODEL_RTOL, MODEL_ATOL = 1e-4, 1e-6
# Short bounds so that faults end quickly.
FAST_FAULTS = {"TRAIN_PEERS_TIMEOUT_SECONDS": "8", "TRAIN_MASTER_LOST_SECONDS": "5",
               "TRAIN_RANKS_TIMEOUT_SECONDS": "120", "TRAIN_STOP_GRACE_SECONDS": "60"}


class Job:
    """`train` started on some hosts of a cluster, each host's output in its own log file."""

    def __init__(self, cluster, env=None, batch=False, command=None, batch_nodes=None):
        self.cluster = cluster
        self.command = command or []
        self.env = dict(env or {})
        self.batch = batch
        self.batch_nodes = batch_nodes  # an AWS Batch job of the cluster's first hosts only
        self.processes = {}
        self.codes = {}
        self.started_at = {}
        self.exited_at = {}

    def start(self, host, delay=0.0):
        if delay:
            time.sleep(delay)
        env = dict(self.env)
        if self.batch:
            env.update(simcluster.batch_environment(self.cluster, host, num_nodes=self.batch_nodes))
        argv = [TRAIN] if self.batch else [TRAIN, "train"]
        if self.command:
            argv = [TRAIN, "--", *self.command]
        log = open(self.log_path(host), "ab")
        self.processes[host] = self.cluster.popen(host, argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.started_at[host] = time.monotonic()
        log.close()

    def log_path(self, host):
        return os.path.join(self.cluster.host_dir(host), "train.log")

    def log(self, host):
        with open(self.log_path(host), errors="replace") as f:
            return f.read()

    def wait_for_line(self, host, pattern, timeout=JOB_LIMIT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.log(host), re.MULTILINE):
                return
            if self.processes[host].poll() is not None:
                raise AssertionError(f"train on {host} exited before printing /{pattern}/:\n{self.log(host)}")
            time.sleep(0.2)
        raise AssertionError(f"no /{pattern}/ on {host} within {timeout} s:\n{self.log(host)}")

    def wait(self, timeout=JOB_LIMIT):
        """Every started host's exit code; fails the test if one is still running after `timeout` s. When
        each host exited is in exited_at (to a tenth of a second)."""
        deadline = time.monotonic() + timeout
        while len(self.codes) < len(self.processes):
            for host, process in self.processes.items():
                if host not in self.codes and process.poll() is not None:
                    self.codes[host] = process.returncode
                    self.exited_at[host] = time.monotonic()
            if time.monotonic() > deadline:
                running = [host for host in self.processes if host not in self.codes]
                logs = "\n".join(f"--- {h}:\n{self.log(h)[-3000:]}" for h in self.processes)
                raise AssertionError(f"train on {running} still runs after {timeout} s\n{logs}")
            time.sleep(0.1)
        return self.codes

    def describe(self):
        return "\n".join(f"--- {host} (exit {self.codes.get(host)}):\n{self.log(host)[-4000:]}"
                         for host in self.processes)


def rank_processes(cluster, host):
    """The `train rank` processes on a host."""
    found = []
    for pid in cluster.pids(host):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 2 and argv[0].endswith(b"train") and argv[1] == b"rank":
            found.append(pid)
    return found


def exe_of(pid):
    """The program a process runs; None when it has ended."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def failure_text(cluster, host):
    path = os.path.join(cluster.opt_ml(host), "output", "failure")
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        return f.read()


def model_path(cluster, host):
    return os.path.join(cluster.opt_ml(host), "model", "model.safetensors")


class MultiHostTest(unittest.TestCase):
    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="multihost-")

    def tearDown(self):
        shutil.rmtree(self.workdir, ignore_errors=True)

    def cluster(self, hosts=3):
        return simcluster.SimCluster(hosts, os.path.join(self.workdir, f"cluster-{time.monotonic_ns()}"))

    def assert_nothing_left(self, cluster, hosts=None):
        """No process of the job on any host (a few seconds' grace for the kernel to finish reaping)."""
        deadline = time.monotonic() + 10
        while True:
            left = {host: cluster.pids(host) for host in (hosts or cluster.hosts)}
            left = {host: pids for host, pids in left.items() if pids}
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        described = {host: [open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ")[:80]
                            for p in pids if os.path.exists(f"/proc/{p}")] for host, pids in left.items()}
        self.assertEqual(left, {}, f"processes left: {described}")

    def start_all(self, job, order=None, delays=None):
        for host in order or job.cluster.hosts:
            job.start(host, (delays or {}).get(host, 0.0))

    def start_training(self, cluster, hyperparameters=LONG_JOB, env=FAST_FAULTS, until_step=2):
        """The SageMaker job started on every host, once the master has logged step `until_step`."""
        simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(hyperparameters))
        job = Job(cluster, env=env)
        self.start_all(job)
        job.wait_for_line("algo-1", rf"step={until_step} ")
        return job

    # -- training across hosts -------------------------------------------------------------------------

    one_host_models = {}

    def single_host_model(self, hyperparameters):
        """The model of the same job on one host with all the ranks (6), run directly on this machine
        (once per set of hyperparameters)."""
        key = json.dumps(hyperparameters, sort_keys=True)
        if key not in MultiHostTest.one_host_models:
            MultiHostTest.one_host_models[key] = self.train_on_one_host(hyperparameters)
        return MultiHostTest.one_host_models[key]

    def train_on_one_host(self, hyperparameters):
        base = os.path.join(self.workdir, "one-host")
        config = os.path.join(base, "input", "config")
        os.makedirs(config)
        ranks = 3 * hyperparameters["processes_per_host"]
        one_host = dict(hyperparameters, processes_per_host=ranks,
                        mini_batch_size=3 * hyperparameters["mini_batch_size"])
        with open(os.path.join(config, "resourceconfig.json"), "w") as f:
            json.dump({"current_host": "algo-1", "hosts": ["algo-1"]}, f)
        with open(os.path.join(config, "hyperparameters.json"), "w") as f:
            json.dump(simcluster.sdk_encoded_hyperparameters(one_host), f)
        result = subprocess.run([TRAIN], env={"PATH": os.environ["PATH"], "SAGEMAKER_BASE_DIR": base},
                                capture_output=True, text=True, timeout=JOB_LIMIT)
        self.assertEqual(result.returncode, 0, result.stderr[-4000:])
        self.assertIn(f"parameters identical on all {ranks} ranks", result.stderr)
        return read_safetensors(os.path.join(base, "model", "model.safetensors"))

    def assert_models_close(self, multi_host, one_host):
        self.assertEqual(sorted(multi_host), sorted(one_host))
        worst = 0.0
        for name, value in multi_host.items():
            expected = one_host[name]
            self.assertEqual(value.shape, expected.shape, name)
            if value.dtype.kind == "f":
                difference = np.abs(value.astype(np.float64) - expected)
                worst = max(worst, float(np.max(difference / (MODEL_ATOL + MODEL_RTOL * np.abs(expected)),
                                                initial=0.0)))
            else:
                np.testing.assert_array_equal(value, expected, err_msg=name)
        print(f"3 hosts x 2 ranks vs 1 host x 6 ranks: worst |difference| / (atol + rtol*|value|) = {worst:.3g} "
              f"(rtol {MODEL_RTOL}, atol {MODEL_ATOL})", flush=True)
        self.assertLessEqual(worst, 1.0)

    def check_three_host_training(self, job):
        codes = job.wait()
        self.assertEqual(codes, {host: 0 for host in job.cluster.hosts}, job.describe())
        master, workers = job.cluster.hosts[0], job.cluster.hosts[1:]
        self.assertIn("parameters identical on all 6 ranks", job.log(master), job.describe())
        self.assertTrue(os.path.exists(model_path(job.cluster, master)))
        self.assertTrue(os.path.exists(os.path.join(job.cluster.opt_ml(master), "output", "success")))
        for worker in workers:
            self.assertFalse(os.path.exists(model_path(job.cluster, worker)), "only rank 0 writes the model")
            self.assertIsNone(failure_text(job.cluster, worker))
        # Each rank saw its own host's SM_CURRENT_HOST (the ranks' identity lines name their hosts).
        for rank in range(6):
            host = f"node-{rank // 2}" if job.batch else job.cluster.hosts[rank // 2]
            self.assertRegex(job.log(master), rf"rank {rank} of 6 \(local rank {rank % 2} of 2\) on host {host}:")
        self.assert_nothing_left(job.cluster)
        return read_safetensors(model_path(job.cluster, master))

    def test_three_hosts_train_resnet50_like_one_host(self):
        with self.cluster() as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(RESNET50_JOB))
            job = Job(cluster)
            self.start_all(job)
            model = self.check_three_host_training(job)
        self.assert_models_close(model, self.single_host_model(RESNET50_JOB))

    def test_aws_batch_children_in_random_order_one_late(self):
        with self.cluster() as cluster:
            for host in cluster.hosts:
                config = os.path.join(cluster.opt_ml(host), "input", "config")
                os.makedirs(config, exist_ok=True)
                with open(os.path.join(config, "hyperparameters.json"), "w") as f:
                    json.dump(simcluster.sdk_encoded_hyperparameters(RESNET50_JOB), f)
            job = Job(cluster, batch=True)
            children = cluster.hosts[1:]
            random.shuffle(children)
            # The main node first (Batch starts it first); children in random order, the last 10 s late.
            job.start(cluster.hosts[0])
            threads = [threading.Thread(target=job.start, args=(host, 10.0 if i == len(children) - 1 else 0.5))
                       for i, host in enumerate(children)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            model = self.check_three_host_training(job)
            self.assertRegex(job.log(cluster.hosts[0]), r"node \d registered from 10\.")
        self.assert_models_close(model, self.single_host_model(RESNET50_JOB))

    def test_each_rank_sees_its_own_hosts_sm_variables(self):
        with self.cluster() as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(
                {"processes_per_host": 2}))
            script = ('echo "rank $OMPI_COMM_WORLD_RANK: SM_CURRENT_HOST=$SM_CURRENT_HOST '
                      'hostname=$(hostname) SM_HOSTS=$SM_HOSTS"')
            job = Job(cluster, command=["/bin/sh", "-c", script])
            self.start_all(job)
            codes = job.wait(timeout=90)
            self.assertEqual(codes, {host: 0 for host in cluster.hosts}, job.describe())
            for rank in range(6):
                host = cluster.hosts[rank // 2]
                self.assertIn(f'rank {rank}: SM_CURRENT_HOST={host} hostname={host} '
                              f'SM_HOSTS=["algo-1","algo-2","algo-3"]', job.log("algo-1"))
            self.assert_nothing_left(cluster)

    # -- heterogeneous clusters: only the distribution's instance groups train ---------------------------

    def test_instance_groups_only_the_distributions_hosts_run_ranks(self):
        groups = [{"name": "data", "hosts": ["algo-1"], "instance_type": "ml.c5.xlarge"},
                  {"name": "gpu", "hosts": ["algo-3", "algo-2"], "instance_type": "ml.p4d.24xlarge"}]
        # A tuning job's keys, the distribution's groups, and the command's own hyperparameters.
        hyperparameters = {"sagemaker_distribution_instance_groups": ["gpu"], "processes_per_host": 2,
                           "_tuning_objective_metric": "loss", "sagemaker_program": "train.py",
                           "batch-size": 64, "lr": 0.01}
        with self.cluster() as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(hyperparameters),
                                           instance_groups=groups)
            script = 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname) group=$SM_CURRENT_INSTANCE_GROUP args: $*"'
            job = Job(cluster, env=FAST_FAULTS, command=["/bin/sh", "-c", script, "sh"])
            self.start_all(job)
            codes = job.wait(timeout=120)
            self.assertEqual(codes, {host: 0 for host in cluster.hosts}, job.describe())
            # The first of the training hosts as resourceconfig.json lists them: the toolkit's master_hostname.
            master = job.log("algo-3")
            for rank in range(4):
                host = ["algo-3", "algo-2"][rank // 2]
                self.assertIn(f"rank {rank} on {host} group=gpu args: --batch-size 64 --lr 0.01 --processes_per_host 2",
                              master, job.describe())
            self.assertNotIn("on algo-1", master)
            self.assertIn("all 4 ranks finished successfully", master)
            idle = job.log("algo-1")
            self.assertIn("not in the training instance groups", idle, job.describe())
            self.assertIn("the job has ended", idle, job.describe())
            self.assertNotIn("/usr/sbin/sshd", idle)  # no rank comes here, so no sshd either
            for host in cluster.hosts:
                self.assertIsNone(failure_text(cluster, host), job.describe())
            self.assertTrue(os.path.exists(os.path.join(cluster.opt_ml("algo-3"), "output", "success")))
            self.assert_nothing_left(cluster)

    def test_instance_groups_mpi_enabled_without_groups_runs_a_world_per_group(self):
        # As the toolkit: a distribution enabled without sagemaker_distribution_instance_groups trains each
        # host's own group, so each group is an MPI world of its own, and SM_TRAINING_ENV says so.
        groups = [{"name": "data", "hosts": ["algo-1"], "instance_type": "ml.c5.xlarge"},
                  {"name": "gpu", "hosts": ["algo-3", "algo-2"], "instance_type": "ml.p4d.24xlarge"}]
        with self.cluster() as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(
                {"sagemaker_mpi_enabled": True}), instance_groups=groups)
            script = ("python3 -c 'import json, os, socket; e = json.loads(os.environ[\"SM_TRAINING_ENV\"]); "
                      "print(\"rank\", os.environ[\"OMPI_COMM_WORLD_RANK\"], \"of\", os.environ[\"OMPI_COMM_WORLD_SIZE\"], "
                      "\"on\", socket.gethostname(), \"distribution_hosts\", e[\"distribution_hosts\"], "
                      "\"master\", e[\"master_hostname\"])'")
            job = Job(cluster, env=FAST_FAULTS, command=["/bin/sh", "-c", script])
            self.start_all(job)
            codes = job.wait(timeout=120)
            self.assertEqual(codes, {host: 0 for host in cluster.hosts}, job.describe())
            self.assertIn("rank 0 of 2 on algo-3 distribution_hosts ['algo-3', 'algo-2'] master algo-3", job.log("algo-3"),
                          job.describe())
            self.assertIn("rank 1 of 2 on algo-2 distribution_hosts ['algo-3', 'algo-2'] master algo-3", job.log("algo-3"),
                          job.describe())
            self.assertIn("rank 0 of 1 on algo-1 distribution_hosts ['algo-1'] master algo-1", job.log("algo-1"),
                          job.describe())
            self.assertIn("each instance group runs its own MPI world", job.log("algo-1"), job.describe())
            self.assert_nothing_left(cluster)

    def test_instance_groups_one_training_host_trains_resnet(self):
        groups = [{"name": "gpu", "hosts": ["algo-2"], "instance_type": "ml.p4d.24xlarge"},
                  {"name": "data", "hosts": ["algo-3", "algo-1"], "instance_type": "ml.c5.xlarge"}]
        hyperparameters = dict(LONG_JOB, max_steps=3, sagemaker_distribution_instance_groups=["gpu"])
        with self.cluster() as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(hyperparameters),
                                           instance_groups=groups)
            job = Job(cluster, env=FAST_FAULTS)
            self.start_all(job)
            codes = job.wait()
            self.assertEqual(codes, {host: 0 for host in cluster.hosts}, job.describe())
            self.assertIn("parameters identical on all 2 ranks", job.log("algo-2"), job.describe())
            self.assertTrue(os.path.exists(model_path(cluster, "algo-2")))
            for idle in ("algo-1", "algo-3"):
                self.assertIn("the job has ended", job.log(idle), job.describe())
                self.assertFalse(os.path.exists(model_path(cluster, idle)))
            self.assert_nothing_left(cluster)

    # -- faults ----------------------------------------------------------------------------------------

    def test_rank_killed_on_a_worker(self):
        with self.cluster() as cluster:
            job = self.start_training(cluster)
            victims = rank_processes(cluster, "algo-2")
            self.assertEqual(len(victims), 2, job.describe())
            os.kill(victims[1], signal.SIGKILL)
            codes = job.wait(timeout=90)
            self.assertEqual(codes["algo-1"], 137, job.describe())
            self.assertEqual(codes["algo-2"], 0, job.describe())
            self.assertEqual(codes["algo-3"], 0, job.describe())
            # The workers outlive the master, as the toolkit's do: where the first host to exit decides the
            # job (the SDK's local mode), the master's 137 comes first.
            for worker in ("algo-2", "algo-3"):
                self.assertGreater(job.exited_at[worker], job.exited_at["algo-1"], job.describe())
                self.assertIn("the master algo-1 has finished", job.log(worker), job.describe())
            failure = failure_text(cluster, "algo-1")
            self.assertRegex(failure.splitlines()[0],
                             r"^Rank [23] of 6 on host algo-2 was killed by signal 9 \(SIGKILL\)\.$", failure)
            self.assert_nothing_left(cluster)

    def test_sigterm_to_a_rank_on_a_worker_is_a_failure_naming_it(self):
        """A SIGTERM that reaches one rank on a worker, not the master's train: every rank checkpointed and
        exited 0 and the job was a success with no model. Now that rank fails the job, saying who sent it."""
        with self.cluster() as cluster:
            job = self.start_training(cluster)
            victim = rank_processes(cluster, "algo-2")[1]
            os.kill(victim, signal.SIGTERM)
            codes = job.wait(timeout=90)
            self.assertEqual(codes["algo-1"], 143, job.describe())
            failure = failure_text(cluster, "algo-1")
            self.assertRegex(failure.splitlines()[0], r"^Rank [23] of 6 on host algo-2 exited with code 143\.$", failure)
            self.assertRegex(failure, rf"Rank [23] of 6 on host algo-2 received SIGTERM from process \d+ \(python3\) "
                                      r"of user root \(uid 0\), a stop the job did not ask for", failure)
            self.assertFalse(os.path.exists(os.path.join(cluster.opt_ml("algo-1"), "output", "success")))
            self.assertFalse(os.path.exists(model_path(cluster, "algo-1")))
            self.assert_nothing_left(cluster)

    def test_worker_that_never_starts(self):
        with self.cluster() as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(LONG_JOB))
            job = Job(cluster, env=FAST_FAULTS)
            self.start_all(job, order=["algo-1", "algo-2"])
            codes = job.wait(timeout=90)
            self.assertEqual(codes["algo-1"], 124, job.describe())
            self.assertEqual(codes["algo-2"], 75, job.describe())
            failure = failure_text(cluster, "algo-1")
            self.assertTrue(failure.startswith("1 host(s) did not answer on port 22 within 8 s: algo-3."), failure)
            self.assertIn("algo-3 (10.", failure)
            worker_failure = failure_text(cluster, "algo-2")
            self.assertTrue(worker_failure.startswith("Host algo-2 lost the master algo-1"), worker_failure)
            self.assert_nothing_left(cluster)

    def test_master_killed(self):
        with self.cluster() as cluster:
            job = self.start_training(cluster)
            killed_at = time.monotonic()
            for pid in cluster.pids("algo-1"):  # the host dies: every process on it at once
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            codes = job.wait(timeout=90)
            took = time.monotonic() - killed_at
            self.assertEqual(codes["algo-1"], -signal.SIGKILL)
            for worker in ("algo-2", "algo-3"):
                self.assertEqual(codes[worker], 75, job.describe())
                failure = failure_text(cluster, worker)
                self.assertTrue(failure.startswith(f"Host {worker} lost the master algo-1: its sshd at 10."),
                                failure)
            print(f"workers ended {took:.1f} s after the master was killed", flush=True)
            self.assert_nothing_left(cluster)

    def test_worker_host_dies(self):
        # Every process of a worker killed at once, as when its host dies: mpirun loses that host's daemon and
        # exits with 205 (Open MPI's ORTE_ERR_COMM_FAILURE, -51) before any rank reports a failure; it read like
        # 128 + a signal and was not documented (issue 31). The failure file says which host, in words.
        with self.cluster() as cluster:
            job = self.start_training(cluster)
            for pid in cluster.pids("algo-2"):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            codes = job.wait(timeout=120)
            self.assertEqual(codes["algo-1"], 205, job.describe())
            self.assertEqual(codes["algo-2"], -signal.SIGKILL)
            self.assertEqual(codes["algo-3"], 0, job.describe())
            # The cause on the first line, which no length limit cuts (mpirun's own lines below may be many).
            lines = failure_text(cluster, "algo-1").splitlines()
            self.assertTrue(lines[0].startswith("mpirun exited with code 205 before any rank reported a failure. "
                                                "mpirun lost its daemon on host algo-2: that host died"), lines)
            self.assert_nothing_left(cluster, ["algo-1", "algo-3"])

    def test_sigterm_to_master_checkpoints_and_restart_resumes(self):
        hyperparameters = dict(LONG_JOB, max_steps=24)
        with self.cluster() as cluster:
            job = self.start_training(cluster, hyperparameters)
            stopped_at = time.monotonic()
            job.processes["algo-1"].send_signal(signal.SIGTERM)
            codes = job.wait(timeout=120)
            took = time.monotonic() - stopped_at
            self.assertLess(took, 120, "SageMaker kills everything 120 s after SIGTERM")
            self.assertEqual(codes, {"algo-1": 143, "algo-2": 0, "algo-3": 0}, job.describe())
            self.assertRegex(job.log("algo-1"), r"checkpoint written at step \d+ \(stop request\)")
            checkpoint = os.path.join(cluster.opt_ml("algo-1"), "checkpoints", "checkpoint.safetensors")
            self.assertTrue(os.path.exists(checkpoint))
            self.assertTrue(failure_text(cluster, "algo-1").startswith("The job was stopped by SIGTERM"))
            stopped_step = int(re.search(r"stopped at step (\d+) on request", job.log("algo-1")).group(1))
            self.assert_nothing_left(cluster)
            print(f"every host exited {took:.1f} s after SIGTERM to the master (step {stopped_step})", flush=True)

            restarted = Job(cluster, env=FAST_FAULTS)
            for host in cluster.hosts:
                os.rename(restarted.log_path(host), restarted.log_path(host) + ".first")
            self.start_all(restarted)
            codes = restarted.wait()
            self.assertEqual(codes, {host: 0 for host in cluster.hosts}, restarted.describe())
            self.assertRegex(restarted.log("algo-1"), rf"resuming from /opt/ml/checkpoints/checkpoint.safetensors: "
                                                      rf"step {stopped_step},")
            self.assertIn("model written to /opt/ml/model after 24 steps", restarted.log("algo-1"))
            self.assert_nothing_left(cluster)

    def test_wrong_network_interface(self):
        with self.cluster() as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(LONG_JOB),
                                           network_interface_name="eth9")
            job = Job(cluster, env=FAST_FAULTS)
            self.start_all(job)
            codes = job.wait(timeout=60)
            self.assertEqual(codes, {host: 65 for host in cluster.hosts}, job.describe())
            for host in cluster.hosts:
                failure = failure_text(cluster, host)
                self.assertTrue(failure.startswith(
                    f'The job\'s network interface "eth9" (resourceconfig.json network_interface_name, or '
                    f'TRAIN_NETWORK_INTERFACE) does not exist on host {host}; its interfaces are: lo, eth0.'),
                    failure)
            self.assert_nothing_left(cluster)

    def test_host_name_that_resolves_late(self):
        hyperparameters = dict(LONG_JOB, max_steps=2)
        with self.cluster() as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(hyperparameters))
            cluster.set_hosts_entry("algo-3", False)
            job = Job(cluster, env=FAST_FAULTS)
            self.start_all(job)
            job.wait_for_line("algo-1", r"host name algo-3 does not resolve yet")
            time.sleep(3)
            cluster.set_hosts_entry("algo-3", True)
            codes = job.wait()
            self.assertEqual(codes, {host: 0 for host in cluster.hosts}, job.describe())
            self.assertRegex(job.log("algo-1"), r"host name algo-3 resolved to 10\.\S+ after \d+ s")
            self.assert_nothing_left(cluster)

    # -- nobody in who does not belong ------------------------------------------------------------------

    def ssh(self, cluster, host, target):
        """`ssh TARGET true` as root from `host` with the cluster's key (every host holds it, as every
        container of an image holds the image's): the CompletedProcess."""
        return cluster.run(host, ["ssh", "-o", "ConnectTimeout=5", target, "true"], timeout=30)

    def test_sshd_lets_in_only_the_master_and_listens_on_the_jobs_interface(self):
        # algo-3 is on the job's network and holds the job's key, but is not one of the job's hosts.
        with self.cluster() as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters({"processes_per_host": 1}),
                                           hosts=["algo-1", "algo-2"])
            # The worker's image has no host key (docker/Dockerfile ships none): train makes one.
            host_key = os.path.join(cluster.host_dir("algo-2"), "etc_ssh", "ssh_host_ed25519_key")
            os.remove(host_key)
            os.remove(host_key + ".pub")
            ready = os.path.join(self.workdir, "checks-done")  # this machine's /tmp: every host sees it
            script = (f'echo "rank $OMPI_COMM_WORLD_RANK up"; i=0; while [ ! -e {ready} ] && [ $i -lt 600 ]; '
                      f'do sleep 0.1; i=$((i+1)); done')
            job = Job(cluster, env=FAST_FAULTS, command=["/bin/sh", "-c", script])
            for host in ("algo-1", "algo-2"):
                job.start(host)
            job.wait_for_line("algo-1", r"rank 1 up", timeout=120)
            try:
                stranger_to_worker = self.ssh(cluster, "algo-3", "algo-2")
                stranger_to_master = self.ssh(cluster, "algo-3", "algo-1")
                worker_over_loopback = self.ssh(cluster, "algo-2", "127.0.0.1")
                master_to_worker = self.ssh(cluster, "algo-1", "algo-2")
            finally:
                open(ready, "w").close()  # the ranks end; the job finishes
            codes = job.wait(timeout=120)
            self.assertEqual(codes, {"algo-1": 0, "algo-2": 0}, job.describe())
            self.assertEqual(stranger_to_worker.returncode, 255, stranger_to_worker)
            self.assertIn("Permission denied", stranger_to_worker.stderr)
            self.assertEqual(stranger_to_master.returncode, 255, stranger_to_master)
            self.assertIn("Permission denied", stranger_to_master.stderr)
            self.assertEqual(worker_over_loopback.returncode, 255, worker_over_loopback)
            self.assertIn("Connection refused", worker_over_loopback.stderr)
            self.assertEqual(master_to_worker.returncode, 0, master_to_worker)
            self.assertRegex(job.log("algo-2"), rf"on {re.escape(cluster.address('algo-2'))}:22, letting root in "
                                                rf"from {re.escape(cluster.address('algo-1'))} only")
            self.assertIn("made this host's SSH host key /etc/ssh/ssh_host_ed25519_key", job.log("algo-2"))
            self.assertTrue(os.path.exists(host_key))
            self.assertTrue(os.path.exists(os.path.join(cluster.opt_ml("algo-1"), "output", "success")))
            self.assert_nothing_left(cluster)

    def test_aws_batch_registration_refuses_strangers_and_the_job_goes_on(self):
        # A 2-node Batch job on algo-1 (main) and algo-2; algo-3 is a stranger on the job's network.
        with self.cluster() as cluster:
            for host in ("algo-1", "algo-2"):
                os.makedirs(os.path.join(cluster.opt_ml(host), "input", "config"), exist_ok=True)
            job = Job(cluster, env=FAST_FAULTS, batch=True, batch_nodes=2,
                      command=["/bin/sh", "-c", 'echo "rank $OMPI_COMM_WORLD_RANK ran"'])
            job.start("algo-1")
            job.wait_for_line("algo-1", r"waiting up to \d+ s for 1 child node\(s\)", timeout=60)
            main = cluster.address("algo-1")
            send = ("import socket, sys\n"
                    "for line in sys.argv[3:]:\n"
                    "    try:\n"
                    "        with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10) as c:\n"
                    "            c.sendall(line.encode() + b'\\n')\n"
                    "            print(c.makefile().readline().strip())\n"
                    "    except OSError as e:\n"
                    "        print(f'error: {e}')\n")
            job_id = simcluster.batch_environment(cluster, "algo-2")["AWS_BATCH_JOB_ID"].split("#")[0]
            # The issue's two lines (the first failed the job, the second took node 1's place), another
            # job's ID, and this job's ID with a slot count the main node does not run.
            strangers = cluster.run("algo-3", ["/usr/bin/python3", "-c", send, main, "7627",
                                               '{"node_index":1,"slots":99}', '{"node_index":1,"slots":1}',
                                               '{"job_id":"another-job","node_index":1,"slots":1}',
                                               json.dumps({"job_id": job_id, "node_index": 1, "slots": 7})],
                                    timeout=60)
            answers = strangers.stdout.splitlines()
            self.assertEqual(len(answers), 4, strangers)
            for answer in answers:
                self.assertTrue(answer.startswith('{"accepted":false'), strangers.stdout)
            # The main node listens on the job's interface only.
            loopback = cluster.run("algo-1", ["/usr/bin/python3", "-c", send, "127.0.0.1", "7627",
                                              json.dumps({"job_id": job_id, "node_index": 1, "slots": 1})])
            self.assertIn("error: [Errno 111] Connection refused", loopback.stdout)
            self.assertIsNone(job.processes["algo-1"].poll(), job.describe())
            job.start("algo-2")
            codes = job.wait(timeout=120)
            self.assertEqual(codes, {"algo-1": 0, "algo-2": 0}, job.describe())
            master = job.log("algo-1")
            stranger = re.escape(cluster.address("algo-3"))
            self.assertEqual(len(re.findall(rf"main node: refused a registration from {stranger}: ", master)), 4, master)
            self.assertIn("it does not name this job", master)
            self.assertIn("node 1 runs 7 rank(s) but the main node runs 1", master)
            self.assertRegex(master, rf"node 1 registered from {re.escape(cluster.address('algo-2'))}")
            self.assertIn("rank 1 ran", master)
            self.assert_nothing_left(cluster, hosts=["algo-1", "algo-2"])

    def test_hanging_rank_becomes_a_failure(self):
        with self.cluster() as cluster:
            job = self.start_training(cluster, env=dict(FAST_FAULTS, TRAIN_STEP_TIMEOUT_SECONDS="8"))
            hung = rank_processes(cluster, "algo-3")[0]
            os.kill(hung, signal.SIGSTOP)
            codes = job.wait(timeout=120)
            self.assertEqual(codes["algo-1"], 124, job.describe())
            self.assertEqual((codes["algo-2"], codes["algo-3"]), (0, 0), job.describe())
            failure = failure_text(cluster, "algo-1")
            self.assertRegex(failure, r"did not complete within 8 s.*another rank is stuck or gone", failure)
            self.assert_nothing_left(cluster)

    def test_master_sshd_killed_mid_job(self):
        """The master's sshd dies while the ranks run. Nothing of the job needs it any more, but the workers
        judge the master alive by it: the master starts it again, and the job ends as it would have."""
        with self.cluster(hosts=2) as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters({"processes_per_host": 1}))
            script = 'echo "rank $OMPI_COMM_WORLD_RANK running"; sleep 20; echo "rank $OMPI_COMM_WORLD_RANK done"'
            job = Job(cluster, env=FAST_FAULTS, command=["/bin/sh", "-c", script])
            self.start_all(job)
            job.wait_for_line("algo-1", r"rank 1 running")
            sshd = [pid for pid in simcluster.child_pids(job.processes["algo-1"].pid)
                    if exe_of(pid) == "/usr/sbin/sshd"]  # train's sshd, not mpirun's ssh
            self.assertEqual(len(sshd), 1, job.describe())
            os.kill(sshd[0], signal.SIGKILL)
            codes = job.wait(timeout=90)
            self.assertEqual(codes, {"algo-1": 0, "algo-2": 0}, job.describe())
            self.assertIn("rank 1 done", job.log("algo-1"))
            self.assertRegex(job.log("algo-1"), rf"sshd \(pid {sshd[0]}\) was killed by signal 9 \(SIGKILL\); "
                                                r"starting it again")
            self.assertNotIn("lost the master", job.log("algo-2"))
            self.assert_nothing_left(cluster)

    def test_worker_cut_off_mid_training(self):
        """The worker's interface goes down after step 10: its daemon can never be told to end, and mpirun
        would wait for it for ever. The master ends within a minute with rank 0's (or 1's) reason."""
        with self.cluster(hosts=2) as cluster:
            job = self.start_training(cluster, dict(LONG_JOB, max_steps=100000),
                                      env=dict(FAST_FAULTS, TRAIN_STEP_TIMEOUT_SECONDS="8"), until_step=10)
            cut_at = time.monotonic()
            simcluster.run_tool(["ip", "-n", cluster.netns("algo-2"), "link", "set", cluster.interface, "down"])
            codes = job.wait(timeout=150)
            took = job.exited_at["algo-1"] - cut_at
            print(f"the master ended {took:.1f} s after its worker was cut off", flush=True)
            self.assertEqual(codes["algo-1"], 124, job.describe())
            self.assertEqual(codes["algo-2"], 75, job.describe())
            failure = failure_text(cluster, "algo-1")
            self.assertRegex(failure.splitlines()[0], r"^Rank [01] of 4 on host algo-1 exited with code 124\.$",
                             failure)
            self.assertRegex(failure, r"did not complete within 8 s", failure)
            self.assertRegex(failure, r"mpirun did not end within \d+ s of the ranks' failure", failure)
            self.assertLess(took, 75, job.describe())
            self.assert_nothing_left(cluster)

    # -- hosts whose job descriptions differ ------------------------------------------------------------

    def test_hosts_whose_job_descriptions_differ_are_refused_before_the_first_step(self):
        """One host's hyperparameters differ: the job trained to its last step and failed with 'parameters
        diverged ... a bug in train', blaming a host at random. Now no step is trained, and the report names
        the host that differs and the key (whichever host it is)."""
        for odd in ("algo-3", "algo-2"):
            with self.subTest(odd=odd), self.cluster() as cluster:
                hyperparameters = dict(LONG_JOB, max_steps=20, learning_rate=0.1)
                simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(hyperparameters))
                odd_config = os.path.join(cluster.opt_ml(odd), "input", "config", "hyperparameters.json")
                simcluster.write_json(odd_config, simcluster.sdk_encoded_hyperparameters(
                    dict(hyperparameters, learning_rate=0.2, momentum=0.5)))
                job = Job(cluster, env=FAST_FAULTS)
                self.start_all(job)
                codes = job.wait(timeout=120)
                self.assertEqual(codes["algo-1"], 65, job.describe())
                failure = failure_text(cluster, "algo-1")
                self.assertEqual(failure.splitlines()[0],
                                 f"Host {odd}'s job description differs from the master algo-1's: hyperparameter "
                                 f'"learning_rate" is 0.2 on {odd} and 0.1 on the master algo-1 (and 1 more below).',
                                 job.describe())
                self.assertIn(f'hyperparameter "momentum" is 0.5 on {odd} and absent on the master algo-1.', failure)
                self.assertNotRegex(job.log("algo-1"), r"step=\d+ ", "a step was trained")
                self.assertNotIn("parameters diverged", job.log("algo-1"))
                self.assert_nothing_left(cluster)

    def test_a_users_program_that_differs_on_a_host_is_named(self):
        """`train -- CMD`: the command's own file differs on one host (its code), and one host's channel is
        delivered otherwise: that host's ranks refuse before the command starts, naming the file."""
        with self.cluster(hosts=2) as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters({"processes_per_host": 1}),
                                           input_data_config={"train": {"TrainingInputMode": "File"}})
            for host, text in (("algo-1", "echo one\n"), ("algo-2", "echo two\n")):
                os.makedirs(os.path.join(cluster.opt_ml(host), "code"), exist_ok=True)
                with open(os.path.join(cluster.opt_ml(host), "code", "run.sh"), "w") as f:
                    f.write(text)
            simcluster.write_json(os.path.join(cluster.opt_ml("algo-2"), "input", "config", "inputdataconfig.json"),
                                  {"train": {"TrainingInputMode": "FastFile"}})
            job = Job(cluster, env=FAST_FAULTS, command=["/bin/sh", "/opt/ml/code/run.sh"])
            self.start_all(job)
            codes = job.wait(timeout=120)
            self.assertEqual(codes["algo-1"], 65, job.describe())
            failure = failure_text(cluster, "algo-1")
            self.assertEqual(failure.splitlines()[0], "Rank 1 of 2 on host algo-2 exited with code 65.", failure)
            self.assertIn("Host algo-2's job description differs from the master algo-1's: ", failure)
            self.assertRegex(failure, r'channel "train" is "FastFile FullyReplicated RecordWrapperType None" on '
                                      r'algo-2 and "File FullyReplicated RecordWrapperType None" on the master algo-1')
            self.assertRegex(failure, r'the program\'s file "/opt/ml/code/run.sh" is 9 bytes with checksum '
                                      r'[0-9a-f]{16} on algo-2 and 9 bytes with checksum [0-9a-f]{16} on the master')
            self.assertNotIn("[rank 1] two", job.log("algo-1"), "the command ran on the host that differs")
            self.assert_nothing_left(cluster)


if __name__ == "__main__":
    (TRAIN,), argv = paths_and_unittest_argv("--train")
    if os.geteuid() != 0:
        sys.exit("test_multihost.py must run as root (network namespaces, sshd); it cannot be skipped")
    unittest.main(argv=argv, verbosity=2)
