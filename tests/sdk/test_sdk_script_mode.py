#!/usr/bin/env python3
"""Script mode through the SageMaker Python SDK's local mode: a user's own PyTorch program, sent as
`PyTorch(entry_point="ddp_train.py", source_dir=..., image_uri=IMAGE, instance_count=2, instance_type="local",
distribution=...)`, on the CPU image extended by Debian's python3-torch (a user's `FROM` on our image: the
Containerfile below, built here).

- torch_distributed and mpi, two hosts: a real DDP program (gloo) trains a small model for a few steps and saves
  it from rank 0: fit() returns and model.tar.gz holds the model;
- the same program made to fail on one rank: fit() raises, and the failure names the program's own error;
- the generic Estimator(entry_point=...), one host: one process, and its model.

The harness (Podman's API for compose, the image, fake credentials) is test_sdk_local_mode.py's.

Run as root: /usr/bin/python3 test_sdk_script_mode.py --sdk-python build-sdk/bin/python
"""
import json
import os
import sys
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_sdk_local_mode as local_mode  # noqa: E402
from test_sdk_local_mode import LocalModeCase, log  # noqa: E402

CONTAINERFILE = textwrap.dedent("""\
    ARG BASE
    FROM ${BASE}
    RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-torch \\
        && rm -rf /var/lib/apt/lists/*
""")

# A real DDP program: rank and world from torchrun's environment, init_process_group() with no arguments but
# the backend, a few steps on each rank's share of the batch, the model saved by rank 0 into SM_MODEL_DIR.
DDP_TRAIN = textwrap.dedent("""\
    import argparse, datetime, os
    import torch, torch.distributed as dist, torch.nn as nn
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--fail", default="no")
    args, _ = parser.parse_known_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
        model = nn.parallel.DistributedDataParallel(model)
    generator = torch.Generator().manual_seed(1 + rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        inputs, targets = torch.randn(4, 8, generator=generator), torch.randn(4, 4, generator=generator)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        print(f"rank {rank}/{world} step {step} loss {loss.item():.4f}", flush=True)
    if args.fail == "yes" and rank == world - 1:
        raise RuntimeError("the user's own error: the loss diverged at step 3")
    if rank == 0:
        torch.save((model.module if world > 1 else model).state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
""")


class SdkScriptMode(LocalModeCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        context = os.path.join(cls.work, "torch-image")
        os.makedirs(context)
        with open(os.path.join(context, "Containerfile"), "w") as file:
            file.write(CONTAINERFILE)
        started = time.monotonic()
        apt_cache = os.path.join(local_mode.build_image.__globals__["BASE_CACHE"], "apt-archives")
        cls.torch_image = cls.session.build_image(
            f"localhost/{cls.session.name('torch')}:latest", context, os.path.join(context, "Containerfile"),
            {"BASE": cls.image}, volumes=[f"{apt_cache}:/var/cache/apt/archives"],
            log_path=os.path.join(cls.work, "torch-build.log"))
        log(f"the image with python3-torch built in {time.monotonic() - started:.0f} s")
        cls.source = os.path.join(cls.work, "source")
        os.makedirs(cls.source)
        with open(os.path.join(cls.source, "ddp_train.py"), "w") as file:
            file.write(DDP_TRAIN)

    def fit_script(self, name, estimator, instance_count, distribution=None, hyperparameters=None):
        return self.run_sdk_job(name, "sdk_script_job.py", instance_count, [
            "--image", self.torch_image, "--estimator", estimator, "--entry-point", "ddp_train.py", "--source-dir",
            self.source, "--distribution", json.dumps(distribution), "--hyperparameters",
            json.dumps(hyperparameters or {})])

    def assert_trained_and_saved(self, name, estimator, instance_count, distribution, ranks):
        result, stdout, output = self.fit_script(name, estimator, instance_count, distribution)
        self.assertIsNone(result["raised"], stdout[-6000:])
        self.assertIn(f"rank {ranks - 1}/{ranks} step 4 loss", stdout)
        model = self.tarball(output, "model.tar.gz", stdout)
        self.assertIn("model.pt", model, sorted(model))
        self.assertIn("success", self.tarball(output, "output.tar.gz", stdout))

    def test_1_torch_distributed_two_hosts(self):
        self.assert_trained_and_saved("torch-distributed", "pytorch", 2, {"torch_distributed": {"enabled": True}}, 2)

    def test_2_mpi_two_hosts_two_ranks_each(self):
        self.assert_trained_and_saved("mpi", "pytorch", 2, {"mpi": {"enabled": True, "processes_per_host": 2}}, 4)

    def test_3_generic_estimator_one_process(self):
        self.assert_trained_and_saved("generic", "generic", 1, None, 1)

    def test_4_the_programs_failure_raises_from_fit(self):
        result, stdout, output = self.fit_script("failing", "pytorch", 2, {"torch_distributed": {"enabled": True}},
                                                 {"fail": "yes"})
        self.assertIsNotNone(result["raised"], f"fit() returned for a failed job:\n{stdout[-6000:]}")
        failure = self.failure_text(output, stdout)
        self.assertIn("RuntimeError: the user's own error: the loss diverged at step 3", failure)
        # Local mode names its hosts algo-N-XXXXX.
        self.assertRegex(failure.splitlines()[0], r"^Rank 1 of 2 on host algo-2-\w+ exited with code 1\.$")


if __name__ == "__main__":
    (local_mode.SDK_PYTHON,), argv = local_mode.paths_and_unittest_argv("--sdk-python")
    unittest.main(argv=argv, verbosity=2)
