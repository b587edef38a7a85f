#!/usr/bin/env python3
"""The SageMaker Python SDK's local mode against the image, as ML engineers rehearse a job before paying for
instances: `Estimator(image_uri=IMAGE, instance_type="local", instance_count=N).fit({"train": "file://..."})`.

Here: the SDK (`sagemaker<3`, in build-sdk/, from PyPI via scripts/setup.sh) with LocalSession and local_code,
fake AWS credentials, file:// input and output; Debian's docker-compose 1.29 talking to Podman's
Docker-compatible API (`podman system service` with the container test's containers.conf); a `docker` on PATH
that is Podman (the SDK asks `docker compose version` first). The image is the container test's
(TRAIN_TEST_IMAGE, built once for both by the ctest fixture; built here when it is not given). The cases:

- one host: fit() returns, model.tar.gz holds model.safetensors and model.json, output.tar.gz holds success;
- two hosts x 2 ranks: one model, parameters identical on all 4 ranks;
- a bad hyperparameter, and bad data, on one host: output.tar.gz's failure says why (on one host compose 1.29
  against Podman sometimes misses the container's exit code, so the failure file is what is asserted);
- bad data on two hosts: fit() raises (the worker outlives the master, so the master's exit code is the
  job's), and the failure says why.

Run as root: /usr/bin/python3 test_sdk_local_mode.py --sdk-python build-sdk/bin/python
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "container"))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
from command_line import paths_and_unittest_argv  # noqa: E402
from podman_session import PodmanSession, require_tools  # noqa: E402
from train_image import build_image  # noqa: E402

SDK_PYTHON = None
FIT_LIMIT = 420  # seconds for one fit(); the job's own waits are bounded much shorter (JOB_ENVIRONMENT)
TINY_JOB = {"num_layers": 18, "image_shape": "3,28,28", "mini_batch_size": 8, "epochs": 1, "max_steps": 2,
            "augmentation_type": "none", "processes_per_host": 1}
JOB_ENVIRONMENT = {"TRAIN_PEERS_TIMEOUT_SECONDS": "120", "TRAIN_RANKS_TIMEOUT_SECONDS": "120",
                   "TRAIN_RESOLVE_TIMEOUT_SECONDS": "60"}
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "AKIAFAKEFAKEFAKEFAKE", "AWS_SECRET_ACCESS_KEY": "fake/secret/for/local/mode",
            "AWS_DEFAULT_REGION": "us-east-1"}


def log(message):
    print(f"[sdk test] {message}", file=sys.stderr, flush=True)


class LocalModeCase(unittest.TestCase):
    """What every local-mode test needs: the image, Podman's API for compose, the data, one fit() at a time."""

    @classmethod
    def setUpClass(cls):
        require_tools("podman", "docker-compose")
        if not os.access(SDK_PYTHON, os.X_OK):
            raise RuntimeError(f"{SDK_PYTHON} is missing: scripts/setup.sh installs the SDK into build-sdk/")
        cls.work = tempfile.mkdtemp(prefix="train-sdk-test-")
        cls.session = PodmanSession(prefix="train-sdk")
        cls.service = None
        cls.addClassCleanup(cls._clean_up)
        cls.image = os.environ.get("TRAIN_TEST_IMAGE") or build_image(cls.session, cls.work)

        # Podman's Docker-compatible API for compose, and a `docker` that is Podman for the SDK's own checks.
        socket_path = os.path.join(cls.work, "podman.sock")
        cls.service_log = open(os.path.join(cls.work, "podman-service.log"), "w")
        cls.service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{socket_path}"],
                                       env=cls.session.env, stdout=cls.service_log, stderr=subprocess.STDOUT)
        shims = os.path.join(cls.work, "bin")
        os.makedirs(shims)
        with open(os.path.join(shims, "docker"), "w") as shim:
            shim.write('#!/bin/sh\nexec podman "$@"\n')
        os.chmod(os.path.join(shims, "docker"), 0o755)
        cls.env = dict(cls.session.env, DOCKER_HOST=f"unix://{socket_path}", PATH=f"{shims}:{os.environ['PATH']}",
                       SAGEMAKER_SUPPRESS_V2_WARNING="1", **FAKE_AWS)
        deadline = time.monotonic() + 60
        while subprocess.run(["docker-compose", "version"], env=cls.env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode != 0 or not os.path.exists(socket_path):
            if time.monotonic() > deadline or cls.service.poll() is not None:
                raise RuntimeError("podman system service did not answer within 60 s")
            time.sleep(0.5)

        # Training data: 96 Fashion-MNIST images as an image folder, and a copy whose images are all cut short
        # (so the first batch meets one, whichever the shuffle picks).
        cls.data = os.path.join(cls.work, "fashion")
        subprocess.run(["/usr/bin/python3", os.path.join(REPO, "scripts", "data", "make_fashion_mnist_folder.py"), "--limit",
                        "96", cls.data], check=True, stdout=subprocess.DEVNULL)
        cls.bad_data = os.path.join(cls.work, "fashion-bad")
        shutil.copytree(os.path.join(cls.data, "train"), cls.bad_data)
        for image in glob.glob(os.path.join(cls.bad_data, "*", "*.png")):
            with open(image, "r+b") as file:
                file.truncate(os.path.getsize(image) // 3)

    @classmethod
    def _clean_up(cls):
        if cls.service is not None:
            cls.service.terminate()
            try:
                cls.service.wait(timeout=20)
            except subprocess.TimeoutExpired:
                cls.service.kill()
                cls.service.wait(timeout=10)
            cls.service_log.close()
        problems = cls.session.cleanup()
        shutil.rmtree(cls.work, ignore_errors=True)
        if problems:
            raise RuntimeError("the SDK test could not remove what it made:\n" + "\n".join(problems))

    # --- one fit() --------------------------------------------------------------------------------------
    def run_sdk_job(self, name, script, instance_count, arguments):
        """Runs tests/sdk/SCRIPT (sdk_job.py, sdk_script_job.py) with the SDK's Python for the job `name`:
        its RESULT, its output, and the folder the job's tarballs went to."""
        root = os.path.join(self.work, name, "root")
        output = os.path.join(self.work, name, "output")
        os.makedirs(root)
        os.makedirs(output)
        started = time.monotonic()
        try:
            result = subprocess.run(
                [SDK_PYTHON, os.path.join(HERE, script), "--instance-count", str(instance_count), *arguments,
                 "--environment", json.dumps(JOB_ENVIRONMENT), "--output", output, "--root", root],
                env=self.env, cwd=os.path.join(self.work, name), text=True, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, timeout=FIT_LIMIT)
        finally:
            self.compose_down(root)
        log(f"{name}: {instance_count} host(s), fit() took {time.monotonic() - started:.0f} s")
        lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
        self.assertEqual(len(lines), 1, f"{script} exited {result.returncode}:\n{result.stdout[-6000:]}")
        return json.loads(lines[0][len("RESULT "):]), result.stdout, output

    def fit(self, name, instance_count, hyperparameters, train):
        return self.run_sdk_job(name, "sdk_job.py", instance_count, ["--image", self.image, "--hyperparameters",
                                                                      json.dumps(hyperparameters), "--train", train])

    def compose_down(self, root):
        """What compose made for the jobs under `root` (containers, the sagemaker-local network), removed
        through compose itself."""
        for compose_file in glob.glob(os.path.join(root, "*", "docker-compose.yaml")):
            subprocess.run(["docker-compose", "-f", compose_file, "down", "--timeout", "5"], env=self.env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=120)

    def tarball(self, output, name, stdout):
        """{member name without ./: bytes} of the job's NAME (model.tar.gz, output.tar.gz) under `output`."""
        found = glob.glob(os.path.join(output, "**", name), recursive=True)
        self.assertEqual(len(found), 1, f"{name} under {output}: {found}\n{stdout[-6000:]}")
        members = {}
        with tarfile.open(found[0]) as archive:
            for member in archive.getmembers():
                if member.isfile():
                    members[os.path.normpath(member.name)] = archive.extractfile(member).read()
        return members

    def failure_text(self, output, stdout):
        members = self.tarball(output, "output.tar.gz", stdout)
        self.assertIn("failure", members, f"no failure file in output.tar.gz: {sorted(members)}\n{stdout[-6000:]}")
        self.assertNotIn("success", members)
        return members["failure"].decode()

    def assert_names_a_bad_image(self, failure):
        self.assertRegex(failure, r"/opt/ml/input/data/train/[^ ]+\.png", failure)


class SdkLocalMode(LocalModeCase):
    # --- the cases -------------------------------------------------------------------------------------
    def test_1_one_host(self):
        result, stdout, output = self.fit("one-host", 1, TINY_JOB, os.path.join(self.data, "train"))
        self.assertIsNone(result["raised"], stdout[-6000:])
        self.assertIn("===== Job Complete =====", stdout)
        model = self.tarball(output, "model.tar.gz", stdout)
        self.assertIn("model.safetensors", model, sorted(model))
        self.assertIn("model.json", model, sorted(model))
        self.assertEqual(json.loads(model["model.json"]).get("num_classes", 10), 10)
        self.assertIn("success", self.tarball(output, "output.tar.gz", stdout))

    def test_2_two_hosts_two_ranks_each(self):
        job = dict(TINY_JOB, processes_per_host=2)
        result, stdout, output = self.fit("two-hosts", 2, job, os.path.join(self.data, "train"))
        self.assertIsNone(result["raised"], stdout[-6000:])
        self.assertIn("parameters identical on all 4 ranks", stdout)
        model = self.tarball(output, "model.tar.gz", stdout)
        self.assertEqual(sorted(name for name in model if name.endswith("model.safetensors")), ["model.safetensors"])
        self.assertIn("success", self.tarball(output, "output.tar.gz", stdout))

    def test_3_bad_hyperparameter_one_host(self):
        result, stdout, output = self.fit("bad-hyperparameter", 1, dict(TINY_JOB, num_layers=17),
                                          os.path.join(self.data, "train"))
        first = self.failure_text(output, stdout).splitlines()[0]
        self.assertTrue(first.startswith("The job description is invalid: "), first)
        self.assertIn("num_layers", first)

    def test_4_bad_data_one_host(self):
        result, stdout, output = self.fit("bad-data-one-host", 1, TINY_JOB, self.bad_data)
        self.assert_names_a_bad_image(self.failure_text(output, stdout))

    def test_5_bad_data_two_hosts(self):
        job = dict(TINY_JOB, processes_per_host=2)
        result, stdout, output = self.fit("bad-data-two-hosts", 2, job, self.bad_data)
        self.assertIsNotNone(result["raised"], f"fit() returned for a failed job:\n{stdout[-6000:]}")
        self.assertNotIn("===== Job Complete =====", stdout)
        self.assert_names_a_bad_image(self.failure_text(output, stdout))


if __name__ == "__main__":
    (SDK_PYTHON,), argv = paths_and_unittest_argv("--sdk-python")
    unittest.main(argv=argv, verbosity=2)
