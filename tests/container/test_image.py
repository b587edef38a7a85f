"""The image users run, built and run for real: docker/Dockerfile built with Podman on a Debian base made
here (no registry can be reached: debootstrap, then `podman import`; docs/architecture.md, "Containers on a machine without Docker"), for both stages, then

- `ldd /usr/local/bin/train` in the image: every library train loads is there;
- train in the image: when this host runs the base's Debian release, the host build's CPU-only train
  (TRAIN_TEST_PREBUILT, set by ctest) goes in as it is (TRAIN_FROM=prebuilt), instead of compiling the same
  sources again; otherwise (or with TRAIN_TEST_IMAGE_COMPILE=1) the image's build stage compiles it. The
  image's own check (ldd finds every library, `train --version`) runs either way, and the compile stage's
  sources are checked to configure with CMake (test_0);

- a one-host SageMaker job started as SageMaker starts it (`podman run ... IMAGE train`, a host directory at
  /opt/ml): exit 0, the model files and output/success;
- a job with a bad hyperparameter: exit 65 and output/failure's first line naming the problem;
- two containers, algo-1 and algo-2, on a private internal network running one job together (train starts
  sshd in each, with a host key of its own and root let in from algo-1 only; mpirun on algo-1 starts the
  ranks on both over ssh): both exit 0, one model, on algo-1;
- a one-host job of two ranks in a container that may not ptrace (a seccomp profile refuses
  process_vm_readv): train's mpirun works there, and with Open MPI's single-copy CMA forced back its reads
  fail (`Read -1, expected N, errno = 1`).

Everything it makes (containers, images, the network) has a name unique to the run and is removed at the
end, pass or fail (TRAIN_TEST_IMAGE=IMAGE skips the build and uses that image, which is kept). The Debian root file system is cached in TRAIN_TEST_BASE_CACHE
(default /var/cache/train-test-base) with the build's downloaded .debs. Missing podman or debootstrap is
a failure. Run as root: /usr/bin/python3 test_image.py
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from podman_session import PodmanSession, require_tools  # noqa: E402
from sagemaker_job import write_job  # noqa: E402
from train_image import build_image, log  # noqa: E402

# ResNet-18 on tiny synthetic images: the real launcher, mpirun and training, in seconds.
TINY_JOB = {"num_layers": 18, "image_shape": "3,32,32", "data_format": "synthetic", "num_classes": 10,
            "mini_batch_size": 4, "processes_per_host": 2, "max_steps": 2}
# Bounds of the job's own waits, so that a broken network fails in minutes, and of this test's waits.
JOB_ENV = {"TRAIN_PEERS_TIMEOUT_SECONDS": "120", "TRAIN_RANKS_TIMEOUT_SECONDS": "120",
           "TRAIN_RESOLVE_TIMEOUT_SECONDS": "60"}
JOB_LIMIT = 300


class ImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_tools("podman", "debootstrap")
        cls.work = tempfile.mkdtemp(prefix="train-container-test-")
        cls.session = PodmanSession()
        cls.addClassCleanup(cls._clean_up)
        cls.network = cls.session.create_network(cls.session.name("net"))
        if os.environ.get("TRAIN_TEST_IMAGE"):
            # For working on this test: an image built before, used as it is and not removed.
            cls.image = os.environ["TRAIN_TEST_IMAGE"]
            return

        cls.image = build_image(cls.session, cls.work)

    @classmethod
    def _clean_up(cls):
        problems = cls.session.cleanup()
        shutil.rmtree(cls.work, ignore_errors=True)
        if problems:
            raise RuntimeError("the container test could not remove what it made:\n" + "\n".join(problems))

    # --- helpers -----------------------------------------------------------------------------------------
    def job_dir(self, name, current_host, hosts, hyperparameters):
        return write_job(os.path.join(self.work, name), current_host, hosts, hyperparameters)

    def run_args(self, host, opt_ml):
        """What SageMaker gives a container: its host name, the job's network, /opt/ml from the host."""
        args = ["--pull=never", "--hostname", host, "--network", f"{self.network}:alias={host}",
                "-v", f"{opt_ml}:/opt/ml"]
        for key, value in JOB_ENV.items():
            args += ["-e", f"{key}={value}"]
        return args

    def run_job(self, name, opt_ml):
        started = time.monotonic()
        result = self.session.run_container(self.session.name(name), self.run_args("algo-1", opt_ml), self.image,
                                            ["train"], timeout=JOB_LIMIT)
        log(f"{name}: exit {result.returncode} in {time.monotonic() - started:.0f} s")
        return result

    def assert_model_written(self, opt_ml, output):
        for name in ("model.safetensors", "model.json"):
            self.assertTrue(os.path.isfile(os.path.join(opt_ml, "model", name)), f"no model/{name}; output:\n{output}")
        with open(os.path.join(opt_ml, "model", "model.json")) as file:
            self.assertIn("18", json.dumps(json.load(file)))
        self.assertTrue(os.path.isfile(os.path.join(opt_ml, "output", "success")), output)
        self.assertFalse(os.path.exists(os.path.join(opt_ml, "output", "failure")), output)

    # --- the compile stage, when the image took the host's train -------------------------------------------
    def test_0_compile_stage_sources_configure(self):
        """What the Dockerfile's compile stage copies is enough for its CMake build of train."""
        with open(os.path.join(REPO, "docker", "Dockerfile")) as file:
            lines = file.read().split("\n")
        start = next(i for i, line in enumerate(lines) if line.startswith("FROM ") and " AS compiled" in line)
        sources = []
        for line in lines[start + 1:]:
            if line.startswith("FROM "):
                break
            words = line.split()
            if words[:1] == ["COPY"] and not words[1].startswith("--") and not words[-1].startswith("/"):
                sources += words[1:-1]
        self.assertIn("CMakeLists.txt", sources)
        tree = os.path.join(self.work, "compile-stage")
        for source in sources:
            path = os.path.join(REPO, source)
            if os.path.isdir(path):
                shutil.copytree(path, os.path.join(tree, source))
            else:
                os.makedirs(os.path.dirname(os.path.join(tree, source)), exist_ok=True)
                shutil.copy2(path, os.path.join(tree, source))
        result = subprocess.run(["cmake", "-S", tree, "-B", os.path.join(tree, "build"), "-G", "Ninja",
                                 "-DBUILD_TESTING=OFF", "-DTRAIN_CUDA=OFF"],
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(result.returncode, 0, f"the compile stage's sources ({' '.join(sources)}) do not "
                                               f"configure:\n{result.stdout[-4000:]}")
        # Every source the train target compiles is there (ninja plans the build without running it).
        result = subprocess.run(["ninja", "-C", os.path.join(tree, "build"), "-n", "train"],
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(result.returncode, 0, result.stdout[-4000:])

    # --- the jobs ----------------------------------------------------------------------------------------
    def test_1_one_host_job_as_sagemaker_runs_it(self):
        opt_ml = self.job_dir("one-host", "algo-1", ["algo-1"], TINY_JOB)
        result = self.run_job("one-host", opt_ml)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assert_model_written(opt_ml, result.stdout)

    def test_2_bad_hyperparameter_fails_with_65_and_a_reason(self):
        opt_ml = self.job_dir("bad-job", "algo-1", ["algo-1"], dict(TINY_JOB, num_layers=17))
        result = self.run_job("bad-job", opt_ml)
        self.assertEqual(result.returncode, 65, result.stdout)
        with open(os.path.join(opt_ml, "output", "failure")) as file:
            first_line = file.readline()
        self.assertTrue(first_line.startswith("The job description is invalid: "), first_line)
        self.assertIn("num_layers", first_line)
        self.assertFalse(os.path.exists(os.path.join(opt_ml, "output", "success")))
        self.assertFalse(os.path.exists(os.path.join(opt_ml, "model", "model.safetensors")))

    def test_0_train_finds_every_library_it_loads(self):
        # The runtime stage installs what the build stage's ldd named; nothing train loads may be missing.
        result = self.session.run_container(self.session.name("ldd"), ["--pull=never", "--entrypoint", "ldd"],
                                            self.image, ["/usr/local/bin/train"], timeout=120)
        log(f"ldd /usr/local/bin/train in the image:\n{result.stdout.strip()}")
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertNotIn("not found", result.stdout)
        self.assertIn("libmpi", result.stdout)

    def test_3_two_containers_run_one_job(self):
        hosts = ["algo-1", "algo-2"]
        opt_ml = {host: self.job_dir(f"two-hosts-{host}", host, hosts, TINY_JOB) for host in hosts}
        names = {host: self.session.name(f"two-hosts-{host}") for host in hosts}
        started = time.monotonic()
        # The worker first: the master must find it (and wait for it) by name, as on SageMaker.
        for host in reversed(hosts):
            result = self.session.run_container(names[host], self.run_args(host, opt_ml[host]), self.image,
                                                ["train"], detach=True)
            self.assertEqual(result.returncode, 0, result.stdout)
        codes, logs = {}, {}
        for host in hosts:
            waited = self.session.podman("wait", names[host], check=False, timeout=JOB_LIMIT)
            codes[host] = int(waited.stdout.strip()) if waited.returncode == 0 else f"wait failed: {waited.stdout}"
            logs[host] = self.session.podman("logs", names[host], check=False).stdout
        log(f"two hosts: exit {codes} in {time.monotonic() - started:.0f} s")
        everything = "\n".join(f"--- {host} ---\n{logs[host]}" for host in hosts)
        self.assertEqual(codes, {"algo-1": 0, "algo-2": 0}, everything)
        self.assert_model_written(opt_ml["algo-1"], everything)
        self.assertFalse(os.path.exists(os.path.join(opt_ml["algo-2"], "model", "model.safetensors")), everything)
        # 2 ranks on each container, trained together.
        self.assertIn("parameters identical on all 4 ranks", logs["algo-1"], everything)
        # The image ships no host key: each container made its own; its sshd let root in from the master only.
        master_address = re.search(r"host algo-1 \((\S+) on ", logs["algo-1"])
        self.assertIsNotNone(master_address, everything)
        for host in hosts:
            self.assertIn("made this host's SSH host key /etc/ssh/ssh_host_ed25519_key", logs[host], everything)
            self.assertIn(f"letting root in from {master_address.group(1)} only", logs[host], everything)

    def test_5_command_ranks_see_the_jobs_host_name(self):
        # The container is called otherwise; `train -- hostname` (GNU hostname asks gethostname()) answers
        # with the job's current_host in every rank: the image has the library beside train, as the toolkit's
        # MPI runner preloads its own.
        # (The platform's alias of processes_per_host: a user key would be appended to hostname's arguments.)
        opt_ml = self.job_dir("hostname", "algo-1", ["algo-1"], {"sagemaker_mpi_num_of_processes_per_host": 2})
        args = ["--pull=never", "--hostname", "container-7", "-v", f"{opt_ml}:/opt/ml"]
        result = self.session.run_container(self.session.name("hostname"), args, self.image, ["--", "hostname"],
                                            timeout=JOB_LIMIT)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertEqual(sorted(re.findall(r"^\[rank (\d)\] (\S+)$", result.stdout, re.M)),
                         [("0", "algo-1"), ("1", "algo-1")], result.stdout)

    def test_4_ranks_of_one_host_need_no_ptrace_rights(self):
        # Docker's default container may not ptrace its own processes (no CAP_SYS_PTRACE; Yama's ptrace_scope 1
        # on Ubuntu hosts), so Open MPI's single-copy transfers between a host's ranks (process_vm_readv)
        # fail. A seccomp profile that refuses those calls makes any machine such a container.
        profile = os.path.join(self.work, "no-ptrace.json")
        with open(profile, "w") as file:
            json.dump({"defaultAction": "SCMP_ACT_ALLOW",
                       "syscalls": [{"names": ["process_vm_readv", "process_vm_writev", "ptrace"],
                                     "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}, file)
        results = {}
        # train's default, and (the control that shows the profile bites) Open MPI's own default forced back.
        for name, options in (("no-ptrace", None), ("no-ptrace-cma", "--mca btl_vader_single_copy_mechanism cma")):
            job = dict(TINY_JOB, **({"custom_mpi_options": options} if options else {}))
            opt_ml = self.job_dir(name, "algo-1", ["algo-1"], job)
            args = self.run_args("algo-1", opt_ml) + ["--security-opt", f"seccomp={profile}"]
            started = time.monotonic()
            results[name] = self.session.run_container(self.session.name(name), args, self.image, ["train"],
                                                       timeout=JOB_LIMIT)
            log(f"{name}: exit {results[name].returncode} in {time.monotonic() - started:.0f} s")
            if name == "no-ptrace":
                self.assertEqual(results[name].returncode, 0, results[name].stdout)
                self.assert_model_written(opt_ml, results[name].stdout)
                self.assertIn("parameters identical on all 2 ranks", results[name].stdout)
        # Each refused single-copy transfer is Open MPI's `Read -1, expected N, errno = 1` line (the symptom
        # users report; Open MPI 4.1 goes on with the message's bytes not copied, so the job may still exit 0).
        cma_failure = re.compile(r"Read -1, expected [0-9]+, errno = 1")
        self.assertIsNone(cma_failure.search(results["no-ptrace"].stdout),
                          "train's mpirun should not use single-copy CMA:\n" + results["no-ptrace"].stdout)
        self.assertIsNotNone(cma_failure.search(results["no-ptrace-cma"].stdout),
                             "with single-copy CMA forced back, Open MPI should fail its reads in this container "
                             "(if not, the seccomp profile did not bite):\n" + results["no-ptrace-cma"].stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
