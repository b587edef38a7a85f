#!/usr/bin/env python3
"""A PyTorch program's ranks on two simulated hosts (scripts/simcluster.py), two ranks each, under `train --
CMD`: torchrun's environment against the real torchrun's on the same layout (its static rendezvous on each
host: --nnodes=2 --node_rank=N --master_addr=algo-1), and DistributedDataParallel over gloo whose final
weights equal one process's on the whole batch.

    /usr/bin/python3 test_torch_ranks.py --train build/train      (as root; Debian's python3-torch)

/tmp is every simulated host's, so the ranks write what they saw into one folder there.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import simcluster  # noqa: E402
from command_line import paths_and_unittest_argv  # noqa: E402

TRAIN = None
PYTHON = "/usr/bin/python3"
HOSTS, RANKS_PER_HOST = 2, 2
LIMIT = 240  # seconds for one job on every host
TORCHRUN_PORT = 29511  # on the simulated master: its network namespace is its own
# What train sets otherwise on purpose: docs/job.md, "torchrun's variables".
TORCH_DIFFERENCES = {"MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", "OMP_NUM_THREADS"}

DUMP = textwrap.dedent("""\
    import json, os, sys
    with open(os.path.join(os.environ["TEST_WORK"], os.environ["TEST_WHO"] + "." + os.environ["RANK"] + ".json"), "w") as out:
        json.dump(dict(os.environ), out)
""")

# A small model trained for a few steps: with WORLD_SIZE (under train or torchrun) as DDP over gloo, each rank
# on its slice of the batch; without, one process on the whole batch. The mean loss of equal slices, averaged
# by DDP over the ranks, is the whole batch's mean loss: the weights must agree to fp32 noise.
DDP = textwrap.dedent("""\
    import datetime, json, os
    import torch, torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    generator = torch.Generator().manual_seed(1)
    inputs, targets = torch.randn(16, 8, generator=generator), torch.randn(16, 4, generator=generator)
    distributed = "WORLD_SIZE" in os.environ
    rank = 0
    if distributed:
        import torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        rank, world = dist.get_rank(), dist.get_world_size()
        model = nn.parallel.DistributedDataParallel(model)
        share = len(inputs) // world
        inputs, targets = inputs[rank * share:(rank + 1) * share], targets[rank * share:(rank + 1) * share]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()
    with open(os.environ["TEST_OUT"] + f".cwd.{rank}", "w") as out:
        out.write(os.getcwd())
    if rank == 0:
        state = (model.module if distributed else model).state_dict()
        with open(os.environ["TEST_OUT"], "w") as out:
            json.dump({name: value.flatten().tolist() for name, value in state.items()}, out)
""")


class TorchRanksOnTwoHosts(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="train-torch-ranks-")
        os.chmod(self.work, 0o755)
        self.addCleanup(shutil.rmtree, self.work, ignore_errors=True)
        for name, text in {"dump.py": DUMP, "ddp.py": DDP}.items():
            with open(os.path.join(self.work, name), "w") as file:
                file.write(text)

    def run_on_every_host(self, cluster, argv_of_host, env):
        """Starts argv_of_host(host) on every host; every host's exit code and output once all have ended."""
        processes, logs = {}, {}
        for host in cluster.hosts:
            logs[host] = open(os.path.join(self.work, f"{host}.log"), "w+b")
            processes[host] = cluster.popen(host, argv_of_host(host), env=env, stdout=logs[host],
                                            stderr=subprocess.STDOUT)
        deadline = time.monotonic() + LIMIT
        codes = {}
        while len(codes) < len(processes) and time.monotonic() < deadline:
            for host, process in processes.items():
                if host not in codes and process.poll() is not None:
                    codes[host] = process.returncode
            time.sleep(0.2)
        outputs = {}
        for host, log in logs.items():
            if host not in codes:
                processes[host].kill()
                processes[host].wait(timeout=30)
            log.seek(0)
            outputs[host] = log.read().decode(errors="replace")[-4000:]
            log.close()
        return codes, outputs

    def train_on_two_hosts(self, cluster, program, env):
        simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(
            {"processes_per_host": RANKS_PER_HOST}))
        codes, outputs = self.run_on_every_host(cluster, lambda host: [TRAIN, "--", PYTHON, program], env)
        self.assertEqual(codes, {host: 0 for host in cluster.hosts}, outputs)

    def read(self, name):
        with open(os.path.join(self.work, name)) as file:
            return json.load(file)

    def cluster(self):
        return simcluster.SimCluster(HOSTS, os.path.join(self.work, "cluster"))

    def test_rendezvous_variables_equal_torchruns(self):
        dump = os.path.join(self.work, "dump.py")
        with self.cluster() as cluster:
            self.train_on_two_hosts(cluster, dump, {"TEST_WORK": self.work, "TEST_WHO": "train"})
            torchrun = lambda host: [  # noqa: E731
                PYTHON, "-m", "torch.distributed.run", f"--nnodes={HOSTS}",
                f"--node_rank={cluster.hosts.index(host)}", f"--nproc_per_node={RANKS_PER_HOST}",
                "--master_addr=algo-1", f"--master_port={TORCHRUN_PORT}", "--redirects", "1", "--tee", "1", dump]
            env = {"TEST_WORK": self.work, "TEST_WHO": "torchrun"}
            codes, outputs = self.run_on_every_host(cluster, torchrun, env)
            self.assertEqual(codes, {host: 0 for host in cluster.hosts}, outputs)
        parent = cluster.environment(env)
        ports = set()
        for rank in range(HOSTS * RANKS_PER_HOST):
            ours, theirs = self.read(f"train.{rank}.json"), self.read(f"torchrun.{rank}.json")
            torchrun_sets = {name for name in theirs if parent.get(name) != theirs[name]} - {"_"}
            self.assertIn("GROUP_RANK", torchrun_sets)
            for name in sorted(torchrun_sets - TORCH_DIFFERENCES):
                self.assertEqual(ours.get(name), theirs[name], f"rank {rank}: {name}: train's (first), torchrun's")
            self.assertEqual(ours["SM_CURRENT_HOST"], f"algo-{rank // RANKS_PER_HOST + 1}")
            ports.add(ours["MASTER_PORT"])
        self.assertEqual(len(ports), 1, f"one MASTER_PORT on every rank, got {ports}")

    def test_ddp_over_gloo_equals_one_process_on_the_whole_batch(self):
        ddp = os.path.join(self.work, "ddp.py")
        together = os.path.join(self.work, "ddp-train.json")
        with self.cluster() as cluster:
            self.train_on_two_hosts(cluster, ddp, {"TEST_OUT": together})
        self.assert_equals_one_process_on_the_whole_batch(together)

    def assert_equals_one_process_on_the_whole_batch(self, together):
        ddp = os.path.join(self.work, "ddp.py")
        alone = os.path.join(self.work, "ddp-alone.json")
        env = {name: value for name, value in os.environ.items() if name not in ("WORLD_SIZE", "RANK")}
        subprocess.run([PYTHON, ddp], env={**env, "TEST_OUT": alone}, check=True, timeout=LIMIT)
        ours, single = self.read(together), self.read(alone)
        self.assertEqual(set(ours), set(single))
        moved = 0.0
        for name in single:
            for got, want in zip(ours[name], single[name], strict=True):
                self.assertAlmostEqual(got, want, delta=1e-5 + 1e-5 * abs(want), msg=name)
        # The steps did train: the weights moved from their seeded start.
        import torch
        torch.manual_seed(0)
        start = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).state_dict()
        for name, value in start.items():
            moved = max(moved, max(abs(a - b) for a, b in zip(value.flatten().tolist(), single[name])))
        self.assertGreater(moved, 1e-3)

    def test_script_mode_runs_the_program_on_every_host_in_its_code_folder(self):
        # As the SDK's PyTorch(entry_point="ddp.py", distribution={"torch_distributed": ...}) in local mode: the
        # code already in each host's /opt/ml/code, and train started without a command.
        together = os.path.join(self.work, "script-mode.json")
        with open(os.path.join(self.work, "ddp.py")) as file:
            program = file.read()
        with self.cluster() as cluster:
            simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(
                {"sagemaker_program": "ddp.py", "sagemaker_submit_directory": "/opt/ml/code",
                 "sagemaker_torch_distributed_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2}))
            for host in cluster.hosts:
                os.makedirs(os.path.join(cluster.opt_ml(host), "code"), exist_ok=True)
                with open(os.path.join(cluster.opt_ml(host), "code", "ddp.py"), "w") as file:
                    file.write(program)
            codes, outputs = self.run_on_every_host(cluster, lambda host: [TRAIN], {"TEST_OUT": together})
            self.assertEqual(codes, {host: 0 for host in cluster.hosts}, outputs)
            self.assertIn("runner torch_distributed", outputs["algo-1"])
            self.assertIn("code: ddp.py is a Python program", outputs["algo-2"])  # prepared on the worker too
        for rank in range(HOSTS * RANKS_PER_HOST):
            with open(together + f".cwd.{rank}") as file:
                self.assertEqual(file.read(), "/opt/ml/code", f"rank {rank}")
        self.assert_equals_one_process_on_the_whole_batch(together)


if __name__ == "__main__":
    (TRAIN,), argv = paths_and_unittest_argv("--train")
    unittest.main(argv=argv)
