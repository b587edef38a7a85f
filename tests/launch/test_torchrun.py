#!/usr/bin/env python3
"""torchrun's environment on every rank of `train -- CMD`, against the real torchrun (Debian's python3-torch,
`python3 -m torch.distributed.run`) on the same layout, and torch.distributed's init_process_group() with no
arguments on those ranks (gloo on the CPU).

    /usr/bin/python3 test_torchrun.py --train build/train

Each test writes a one-host SageMaker job (SAGEMAKER_BASE_DIR, host algo-1, two ranks) and runs `train --
/usr/bin/python3 PROGRAM`. The oracle runs the same program under torchrun's static rendezvous
(--nnodes=1 --node_rank=0 --nproc_per_node=2 --master_addr=localhost). docs/environment.md names the
variables that differ on purpose (TORCH_DIFFERENCES below), and the test holds every other one torchrun sets
equal to train's.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from command_line import paths_and_unittest_argv  # noqa: E402

TRAIN = None
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch
LIMIT = 120  # seconds for one run of train or torchrun: a broken launch fails instead of hanging
RANKS = 2

# What torchrun sets that train sets otherwise, on purpose (docs/environment.md): the port is train's own
# choice (one free port on the master, the same on every rank); no agent holds a store, so rank 0 creates it
# (torchrun's static rendezvous says True: its agent's store already listens there); no agent reads an
# error file; OMP_NUM_THREADS is the host's cores shared among its ranks (torchrun: 1).
TORCH_DIFFERENCES = {"MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", "OMP_NUM_THREADS"}

DUMP = textwrap.dedent("""\
    import json, os, sys
    with open(os.path.join(os.environ["TEST_WORK"], sys.argv[1] + "." + os.environ["RANK"] + ".json"), "w") as out:
        json.dump(dict(os.environ), out)
""")

# init_process_group() with no arguments but the backend: env:// from RANK, WORLD_SIZE, MASTER_ADDR and
# MASTER_PORT. Each rank adds rank + 1; every rank must see the sum over all.
ALLREDUCE = textwrap.dedent("""\
    import datetime, json, os, sys
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    with open(os.path.join(os.environ["TEST_WORK"], "allreduce." + os.environ["RANK"] + ".json"), "w") as out:
        json.dump({"sum": value.item(), "rank": dist.get_rank(), "world": dist.get_world_size(),
                   "port": os.environ["MASTER_PORT"]}, out)
    dist.destroy_process_group()
""")


def free_port():
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


class TorchrunEnvironment(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="train-torchrun-test-")
        self.addCleanup(shutil.rmtree, self.work, ignore_errors=True)
        self.base = os.path.join(self.work, "opt-ml")
        config = os.path.join(self.base, "input", "config")
        os.makedirs(config)
        documents = {"resourceconfig.json": {"current_host": "algo-1", "hosts": ["algo-1"],
                                             "network_interface_name": "eth0"},
                     "hyperparameters.json": {"processes_per_host": str(RANKS)},
                     "inputdataconfig.json": {}}
        for name, document in documents.items():
            with open(os.path.join(config, name), "w") as file:
                json.dump(document, file)
        for name, text in {"dump.py": DUMP, "allreduce.py": ALLREDUCE}.items():
            with open(os.path.join(self.work, name), "w") as file:
                file.write(text)

    def environment(self, extra=None):
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("OMPI_", "PMIX_", "SM_", "TRAIN_")) and name not in ("MASTER_PORT", "MASTER_ADDR")}
        env.update(SAGEMAKER_BASE_DIR=self.base, TEST_WORK=self.work)
        env.update(extra or {})
        return env

    def run_train(self, *program, extra=None):
        result = subprocess.run([TRAIN, "--", PYTHON, *program], env=self.environment(extra), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=LIMIT)
        self.assertEqual(result.returncode, 0, result.stdout)
        return result.stdout

    def run_torchrun(self, *program):
        # --redirects/--tee 1: torch 1.13 on Python 3.11 cannot take their default 0 (its Std.NONE is not
        # found by iterating the IntFlag); they change where output goes, not the workers' environment.
        result = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--nnodes=1", "--node_rank=0",
                                 f"--nproc_per_node={RANKS}", "--master_addr=localhost",
                                 f"--master_port={free_port()}", "--redirects", "1", "--tee", "1", *program],
                                env=self.environment(), cwd=self.work, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=LIMIT)
        self.assertEqual(result.returncode, 0, result.stdout)
        return result.stdout

    def read(self, name):
        with open(os.path.join(self.work, name)) as file:
            return json.load(file)

    def test_rendezvous_variables_equal_torchruns(self):
        dump = os.path.join(self.work, "dump.py")
        self.run_train(dump, "train")
        self.run_torchrun(dump, "torchrun")
        parent = self.environment()
        ports = set()
        for rank in range(RANKS):
            ours, theirs = self.read(f"train.{rank}.json"), self.read(f"torchrun.{rank}.json")
            torchrun_sets = {name for name in theirs if parent.get(name) != theirs[name]} - {"_"}
            self.assertIn("RANK", torchrun_sets)
            for name in sorted(torchrun_sets - TORCH_DIFFERENCES):
                self.assertEqual(ours.get(name), theirs[name], f"rank {rank}: {name}: train's (first), torchrun's")
            self.assertEqual(ours["TORCHELASTIC_USE_AGENT_STORE"], "False")
            ports.add(ours["MASTER_PORT"])
            self.assertNotIn("TRAIN_MASTER_PORT", ours)
        self.assertEqual(len(ports), 1, f"one MASTER_PORT on every rank, got {ports}")
        self.assertTrue(1 <= int(ports.pop()) <= 65535)

    def test_init_process_group_with_no_arguments_works_on_gloo(self):
        self.run_train(os.path.join(self.work, "allreduce.py"))
        results = [self.read(f"allreduce.{rank}.json") for rank in range(RANKS)]
        for rank, result in enumerate(results):
            self.assertEqual(result["rank"], rank)
            self.assertEqual(result["world"], RANKS)
            self.assertEqual(result["sum"], sum(range(1, RANKS + 1)))
        self.assertEqual(len({result["port"] for result in results}), 1)

    def test_the_launchers_master_port_is_every_ranks(self):
        port = str(free_port())
        self.run_train(os.path.join(self.work, "allreduce.py"), extra={"MASTER_PORT": port})
        self.assertEqual([self.read(f"allreduce.{rank}.json")["port"] for rank in range(RANKS)], [port] * RANKS)

    def test_a_master_port_that_is_not_one_is_refused(self):
        result = subprocess.run([TRAIN, "--", PYTHON, os.path.join(self.work, "dump.py"), "train"],
                                env=self.environment({"MASTER_PORT": "70000"}), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=LIMIT)
        self.assertEqual(result.returncode, 65, result.stdout)
        with open(os.path.join(self.base, "output", "failure")) as file:
            failure = file.read()
        self.assertIn("MASTER_PORT", failure)
        self.assertIn("70000", failure)
        self.assertFalse(os.path.exists(os.path.join(self.work, "train.0.json")))


if __name__ == "__main__":
    (TRAIN,), argv = paths_and_unittest_argv("--train")
    unittest.main(argv=argv)
