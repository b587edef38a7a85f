#!/usr/bin/env python3
"""Script mode's code (entrypoint/user_code/), through `train prepare-code SUBMIT_DIRECTORY PROGRAM`: fetched
into the code folder, unpacked with no member outside it, installed with pip; and what goes wrong, each with its
report and exit code. Against the real things: the SageMaker training toolkit (sagemaker-training 5.1.4,
build-toolkit/: tests/user_code/toolkit_code.py) fetches the same code into another folder and says which pip
commands it runs; a local S3 that checks access as AWS does (moto's server, build-moto/:
tests/support/local_s3.py); real pip, installing from files the test makes (PIP_NO_INDEX, PIP_FIND_LINKS and
PIP_NO_BUILD_ISOLATION in the job's environment, which pip reads and train passes on: no registry is reached,
and train's own command is the one a job runs).

    python3 test_user_code.py --train build/train --toolkit-python build-toolkit/bin/python \
        --moto-python build-moto/bin/python

Every run sets AWS_EC2_METADATA_DISABLED=true: boto3 would otherwise ask the instance metadata service (a
link-local address) for the instance role when it finds no other credentials. The container credentials
endpoint is tested through AWS_CONTAINER_CREDENTIALS_FULL_URI on 127.0.0.1; the instance role is not tested.
"""
import io
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from command_line import paths_and_unittest_argv  # noqa: E402
from local_s3 import ContainerCredentials, LocalS3, free_port  # noqa: E402

TRAIN = None
TOOLKIT_PYTHON = None
MOTO_PYTHON = None
LIMIT = 180  # seconds for one run of train or the toolkit: a broken fetch fails the test instead of hanging it
WORK = None  # the module's folder: the package index the installs use
LINKS = None

TRAIN_PY = b'import sys\nprint("training", sys.argv[1:])\n'
BUCKET = "sagemaker-us-east-1-111122223333"
KEY = "train-job-1/source/sourcedir.tar.gz"


def clean_environment():
    """This process's environment without what would change a fetch or an install: AWS's, pip's, the toolkit's."""
    return {name: value for name, value in os.environ.items()
            if not name.startswith(("AWS_", "PIP_", "SM_", "SAGEMAKER_", "S3_ENDPOINT_URL", "TRAIN_", "PYTHON"))}


def tree(folder):
    """Everything in `folder`: relative path -> ("dir", mode) / ("file", mode, bytes) / ("link", target)."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, folder)
            status = os.lstat(path)
            if stat.S_ISLNK(status.st_mode):
                found[relative] = ("link", os.readlink(path))
            elif stat.S_ISDIR(status.st_mode):
                found[relative] = ("dir", stat.S_IMODE(status.st_mode))
            else:
                with open(path, "rb") as file:
                    found[relative] = ("file", stat.S_IMODE(status.st_mode), file.read())
    return found


def add_file(archive, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 1700000000
    archive.addfile(info, io.BytesIO(data))


def add_special(archive, name, kind, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.mtime = 1700000000
    archive.addfile(info)


def write_archive(path, build, mode="w:gz"):
    with tarfile.open(path, mode) as archive:
        build(archive)
    return path


def a_job_code(archive):
    """A user's source folder as the SDK packs it: a program, a package, data, a script, links inside."""
    add_special(archive, ".", tarfile.DIRTYPE)
    add_file(archive, "train.py", TRAIN_PY)
    add_special(archive, "helpers", tarfile.DIRTYPE)
    add_file(archive, "helpers/__init__.py", b"VALUE = 1\n")
    add_file(archive, "helpers/data.bin", bytes(range(256)) * 64)
    add_file(archive, "run.sh", b"#!/bin/sh\necho run\n", mode=0o755)
    add_special(archive, "lib", tarfile.SYMTYPE, "helpers")
    add_special(archive, "helpers/again.bin", tarfile.LNKTYPE, "helpers/data.bin")


class Job:
    """One host's /opt/ml in a folder of its own."""

    def __init__(self, work, name):
        self.base = os.path.join(work, name)
        os.makedirs(os.path.join(self.base, "input", "config"))
        os.makedirs(os.path.join(self.base, "output"))
        self.code = os.path.join(self.base, "code")

    def failure(self):
        path = os.path.join(self.base, "output", "failure")
        if not os.path.exists(path):
            return None
        with open(path) as file:
            return file.read()

    def leftovers(self):
        """What a fetch may have left beside the code folder: staging folders."""
        return sorted(name for name in os.listdir(self.base) if name not in ("input", "output", "code"))


class Result:
    def __init__(self, completed, job):
        self.code = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        self.failure = job.failure()
        self.prepared = json.loads(completed.stdout.splitlines()[-1]) if self.code == 0 and completed.stdout else None

    def __str__(self):
        return f"exit {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}\n--- failure\n{self.failure}"


class UserCodeTest(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="train-user-code-test-")
        self.addCleanup(shutil.rmtree, self.work, ignore_errors=True)
        self.job = Job(self.work, "opt-ml")

    def environment(self, job=None, **extra):
        env = clean_environment()
        env.update(SAGEMAKER_BASE_DIR=(job or self.job).base, HOME=self.work, AWS_EC2_METADATA_DISABLED="true",
                   AWS_CONFIG_FILE=os.path.join(self.work, "no-aws-config"),
                   AWS_SHARED_CREDENTIALS_FILE=os.path.join(self.work, "no-aws-credentials"),
                   PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=LINKS, PIP_NO_BUILD_ISOLATION="0",
                   PIP_DISABLE_PIP_VERSION_CHECK="1", PATH=f"{self.venv()}/bin:/usr/bin:/bin")
        env.update(extra)
        return env

    def venv(self):
        """A Python of this test's own for pip to install into (Debian's packages visible, pip among them)."""
        path = os.path.join(self.work, "venv")
        if not os.path.exists(path):
            subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", path],
                           check=True, timeout=LIMIT)
        return path

    def prepare(self, submit_directory, program="train.py", job=None, **extra):
        job = job or self.job
        completed = subprocess.run([TRAIN, "prepare-code", submit_directory, program], env=self.environment(job, **extra),
                                   text=True, capture_output=True, timeout=LIMIT)
        return Result(completed, job)

    def toolkit(self, mode, argument, job, **extra):
        completed = subprocess.run([TOOLKIT_PYTHON, os.path.join(HERE, "toolkit_code.py"), mode, argument],
                                   env=self.environment(job, **extra), text=True, capture_output=True, timeout=LIMIT)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        return json.loads(completed.stdout)

    def archive(self, build, name="sourcedir.tar.gz", mode="w:gz"):
        return write_archive(os.path.join(self.work, name), build, mode)

    def assert_refused(self, result, exit_code, *phrases):
        self.assertEqual(result.code, exit_code, result)
        self.assertIsNotNone(result.failure, result)
        for phrase in phrases:
            self.assertIn(phrase, result.failure.splitlines()[0], result)

    def assert_no_code(self, job=None):
        job = job or self.job
        self.assertEqual(os.listdir(job.code) if os.path.exists(job.code) else [], [], "a half code folder")
        self.assertEqual(job.leftovers(), [], "a staging folder left behind")


class Fetching(UserCodeTest):
    def test_local_archive_is_unpacked_as_the_toolkit_unpacks_it(self):
        archive = self.archive(a_job_code)
        result = self.prepare(archive)
        self.assertEqual(result.code, 0, result)
        self.assertEqual(result.prepared["folder"], self.job.code)
        self.assertEqual(result.prepared["kind"], "python_program")
        self.assertIn(f"unpacked {archive} (5 files", result.prepared["done"][0])
        ours = tree(self.job.code)
        self.assertEqual(ours["lib"], ("link", "helpers"))
        self.assertEqual(os.stat(os.path.join(self.job.code, "helpers", "again.bin")).st_nlink, 2)
        self.assertEqual(self.job.leftovers(), [])

        toolkit_job = Job(self.work, "toolkit")
        self.assertEqual(self.toolkit("fetch", archive, toolkit_job), {"ok": True})
        theirs = tree(toolkit_job.code)
        self.assertEqual(ours, theirs)

    def test_a_plain_tar_is_unpacked_too(self):
        # The toolkit opens every archive as gzip ("r:gz"); train takes any tar Python's tarfile reads.
        result = self.prepare(self.archive(a_job_code, name="sourcedir.tar", mode="w"))
        self.assertEqual(result.code, 0, result)
        self.assertEqual(tree(self.job.code)["train.py"], ("file", 0o644, TRAIN_PY))

    def test_local_folder_is_copied_as_the_toolkit_copies_it(self):
        source = os.path.join(self.work, "src")
        with tarfile.open(self.archive(a_job_code)) as archive:
            archive.extractall(source)
        result = self.prepare(source)
        self.assertEqual(result.code, 0, result)
        self.assertIn(f"copied the folder {source} into {self.job.code}", result.prepared["done"][0])
        toolkit_job = Job(self.work, "toolkit")
        self.assertEqual(self.toolkit("fetch", source, toolkit_job), {"ok": True})
        ours, theirs = tree(self.job.code), tree(toolkit_job.code)
        self.assertEqual(ours, theirs)
        self.assertEqual(ours["lib"][0], "dir", "a link is copied as what it points to, as shutil.copytree does")

    def test_the_code_folder_itself_is_not_fetched(self):
        # The SDK's local mode mounts the source folder at /opt/ml/code and names it; under SAGEMAKER_BASE_DIR
        # /opt/ml/code is the job's own code folder.
        os.makedirs(self.job.code)
        with open(os.path.join(self.job.code, "train.py"), "wb") as file:
            file.write(TRAIN_PY)
        for named in ("/opt/ml/code", self.job.code, ""):
            result = self.prepare(named)
            self.assertEqual(result.code, 0, result)
            self.assertIn("itself: nothing to fetch", result.prepared["done"][0])
        self.assertEqual(list(tree(self.job.code)), ["train.py"])

    def test_a_code_folder_that_holds_code_is_kept_as_the_toolkit_keeps_it(self):
        archive = self.archive(a_job_code)
        toolkit_job = Job(self.work, "toolkit")
        for job in (self.job, toolkit_job):
            os.makedirs(job.code)
            with open(os.path.join(job.code, "train.py"), "w") as file:
                file.write("print('mine')\n")
        result = self.prepare(archive)
        self.assertEqual(result.code, 0, result)
        self.assertIn("already holds code", result.prepared["done"][0])
        self.assertEqual(self.toolkit("fetch", archive, toolkit_job), {"ok": True})
        self.assertEqual(tree(self.job.code), tree(toolkit_job.code))
        self.assertEqual(list(tree(self.job.code)), ["train.py"])

    def test_a_network_isolated_job_names_its_code_channel(self):
        # Under network isolation the SDK sends the code as a channel: /opt/ml/input/data/code/sourcedir.tar.gz.
        channel = os.path.join(self.job.base, "input", "data", "code")
        os.makedirs(channel)
        shutil.copy(self.archive(a_job_code), channel)
        result = self.prepare("/opt/ml/input/data/code/sourcedir.tar.gz")
        self.assertEqual(result.code, 0, result)
        self.assertEqual(tree(self.job.code)["train.py"], ("file", 0o644, TRAIN_PY))


class Refusals(UserCodeTest):
    """Each archive member that would land outside the code folder (or is no file at all) is refused by name,
    before anything is unpacked: exit 65, and no half code folder. The toolkit instead rewrites or skips such
    members with a warning and unpacks the rest; it writes nothing outside either (checked here too)."""

    HOSTILE = {
        "absolute name": (lambda a: add_file(a, "/tmp/train-escape-absolute", b"x"), "'/tmp/train-escape-absolute'",
                          "absolute name"),
        "climbing": (lambda a: add_file(a, "../escaped.txt", b"x"), "'../escaped.txt'", "through '..'"),
        "climbing inside": (lambda a: add_file(a, "sub/../../escaped.txt", b"x"), "'sub/../../escaped.txt'",
                            "through '..'"),
        "link to an absolute path": (lambda a: add_special(a, "etc", tarfile.SYMTYPE, "/etc"), "'etc'",
                                     "absolute path"),
        "link out": (lambda a: add_special(a, "sub/up", tarfile.SYMTYPE, "../../.."), "'sub/up'",
                     "leads out of the code folder"),
        "links that lead out together": (
            lambda a: (add_special(a, "out", tarfile.SYMTYPE, "here/.."), add_special(a, "here", tarfile.SYMTYPE, ".")),
            "'out'", "leads out of the code folder once unpacked"),
        "file through a link": (
            lambda a: (add_special(a, "up", tarfile.SYMTYPE, "."), add_file(a, "up/escaped.txt", b"x")),
            "'up/escaped.txt'", "which the archive makes a symbolic link"),
        "hard link out": (lambda a: add_special(a, "passwd", tarfile.LNKTYPE, "/etc/passwd"), "'passwd'",
                          "hard link to an absolute name"),
        "hard link climbing": (lambda a: add_special(a, "passwd", tarfile.LNKTYPE, "../../etc/passwd"), "'passwd'",
                               "hard link that climbs out"),
        "character device": (lambda a: add_special(a, "null", tarfile.CHRTYPE), "'null'", "device or FIFO"),
        "block device": (lambda a: add_special(a, "disk", tarfile.BLKTYPE), "'disk'", "device or FIFO"),
        "FIFO": (lambda a: add_special(a, "pipe", tarfile.FIFOTYPE), "'pipe'", "device or FIFO"),
    }

    def test_each_hostile_member_is_refused_by_name(self):
        for case, (member, named, reason) in self.HOSTILE.items():
            with self.subTest(case):
                job = Job(self.work, case.replace(" ", "-"))
                archive = self.archive(lambda a: (add_file(a, "train.py", TRAIN_PY), member(a)),
                                       name=case.replace(" ", "-") + ".tar.gz")
                result = self.prepare(archive, job=job)
                self.assert_refused(result, 65, f"archive member {named}", reason, "nothing was unpacked")
                self.assert_no_code(job)
                self.assertFalse(os.path.lexists(os.path.join(job.base, "escaped.txt")))
                self.assertFalse(os.path.lexists("/tmp/train-escape-absolute"))
                # The toolkit: nothing outside its code folder either.
                toolkit_job = Job(self.work, "toolkit-" + case.replace(" ", "-"))
                self.toolkit("fetch", archive, toolkit_job)
                self.assertEqual(toolkit_job.leftovers(), [], case)
                self.assertFalse(os.path.lexists(os.path.join(toolkit_job.base, "escaped.txt")), case)
                self.assertFalse(os.path.lexists("/tmp/train-escape-absolute"), case)

    def test_a_file_that_is_no_archive(self):
        text = os.path.join(self.work, "sourcedir.tar.gz")
        with open(text, "w") as file:
            file.write("print('I am a script, not an archive')\n")
        result = self.prepare(text)
        self.assert_refused(result, 65, "is not a tar archive", "sagemaker_submit_directory must name a .tar.gz")
        self.assert_no_code()

    def test_a_damaged_archive(self):
        archive = self.archive(a_job_code)
        with open(archive, "rb") as file:
            whole = file.read()
        with open(archive, "wb") as file:
            file.write(whole[: len(whole) // 2])
        result = self.prepare(archive)
        self.assert_refused(result, 65, "is damaged")
        self.assert_no_code()

    def test_what_cannot_name_the_code(self):
        for named, phrase in (("/no/such/sourcedir.tar.gz", "/no/such/sourcedir.tar.gz does not exist"),
                              ("https://example.com/sourcedir.tar.gz", "from S3 or from this container's own files"),
                              ("relative/sourcedir.tar.gz", "a local path must be absolute"),
                              ("s3://bucket-only", "an S3 URI names a bucket and a key"),
                              ("/opt/ml/../../etc", "leads out of /opt/ml")):
            with self.subTest(named):
                job = Job(self.work, f"job-{len(os.listdir(self.work))}")
                result = self.prepare(named, job=job)
                self.assert_refused(result, 65, "sagemaker_submit_directory", phrase)
                self.assert_no_code(job)

    def test_a_program_that_is_not_there(self):
        result = self.prepare(self.archive(a_job_code), program="main.py")
        self.assert_refused(result, 65, 'the program "main.py" is not in the code folder',
                            "which holds helpers/, lib/, run.sh, train.py")

    def test_program_names_are_judged_as_the_toolkit_judges_them(self):
        names = ["train.py", "bin/train.sh", "a_b-c+d.py", ".hidden.py", "0", "pkg/sub/main.py", "", "-c", "/abs.py",
                 "../train.py", "./train.py", "a//b.py", "dir/", "a b.py", "a;b.py", "tr\u00e4in.py", "a/./b.py",
                 "a/../b.py", "+x.py", "x\\y.py", "a/+b.py", "a/-b.py"]
        theirs = self.toolkit("validate", json.dumps(names), Job(self.work, "toolkit"))
        os.makedirs(self.job.code)
        for name in names:
            with self.subTest(name):
                failure = os.path.join(self.job.base, "output", "failure")
                if os.path.exists(failure):
                    os.remove(failure)  # the first writer wins: each name's own report
                result = self.prepare("", program=name)
                refused = result.code == 65 and "The job's program cannot be run: the program" in (result.failure or "") \
                    and "is not in the code folder" not in result.failure
                self.assertEqual(not refused, theirs[name], result)

    def test_a_program_name_the_toolkit_refuses(self):
        for program in ("../train.py", "/abs/train.py", "-c", "a b.py", "./train.py"):
            with self.subTest(program):
                job = Job(self.work, f"job-{len(os.listdir(self.work))}")
                result = self.prepare(self.archive(a_job_code), program=program, job=job)
                self.assert_refused(result, 65, "The job's program cannot be run", f'"{program}"')
                self.assert_no_code(job)


def make_links(folder):
    """The local package index: a wheel (tinypkg), an sdist that fails to build (brokenpkg), and one whose build
    sleeps after writing its pid (slowpkg: SLOWPKG_PID_FILE)."""
    os.makedirs(folder)
    source = os.path.join(WORK, "tinypkg")
    os.makedirs(os.path.join(source, "tinypkg"))
    with open(os.path.join(source, "pyproject.toml"), "w") as file:
        file.write('[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                   '[project]\nname = "tinypkg"\nversion = "1.0"\n')
    with open(os.path.join(source, "tinypkg", "__init__.py"), "w") as file:
        file.write("VALUE = 42\n")
    subprocess.run(["/usr/bin/python3", "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation",
                    "-q", "-w", folder, source], check=True, timeout=LIMIT, env=clean_environment())
    sdists = {
        "brokenpkg": 'raise RuntimeError("brokenpkg cannot be built here")\n',
        "slowpkg": textwrap.dedent("""\
            import os, time
            with open(os.environ["SLOWPKG_PID_FILE"], "w") as out:
                out.write(str(os.getpid()))
            time.sleep(600)
            """),
    }
    for name, setup in sdists.items():
        def build(archive, name=name, setup=setup):
            add_file(archive, f"{name}-1.0/setup.py", setup.encode())
            add_file(archive, f"{name}-1.0/PKG-INFO", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode())
        write_archive(os.path.join(folder, f"{name}-1.0.tar.gz"), build)


def process_gone(pid, limit=10):
    """Whether `pid` has ended (gone, or a zombie awaiting its new parent) within `limit` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as file:
                if file.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


class Installing(UserCodeTest):
    def code_archive(self, files):
        def build(archive):
            for name, data in files.items():
                add_file(archive, name, data.encode() if isinstance(data, str) else data,
                         mode=0o755 if name.endswith(".sh") else 0o644)
        return self.archive(build)

    def venv_imports(self, module):
        return subprocess.run([f"{self.venv()}/bin/python", "-c", f"import {module}"], cwd=self.work,
                              capture_output=True, timeout=LIMIT).returncode == 0

    def toolkit_install(self, program):
        """The toolkit's kind and pip commands for the same code (fetched into a job of its own)."""
        toolkit_job = Job(self.work, "toolkit")
        shutil.copytree(self.job.code, toolkit_job.code)
        view = self.toolkit("install", program, toolkit_job)
        for command in view["commands"]:
            self.assertEqual(command["cwd"], toolkit_job.code)
            command["cmd"][0] = "python3"
        return view

    def our_command(self, result):
        prefix = "`"
        line = result.prepared["done"][-1]
        return line[line.index(prefix) + 1: line.rindex(prefix)].split()

    def test_requirements_are_installed_as_the_toolkit_installs_them(self):
        result = self.prepare(self.code_archive({"train.py": TRAIN_PY, "requirements.txt": "tinypkg==1.0\n"}))
        self.assertEqual(result.code, 0, result)
        self.assertTrue(self.venv_imports("tinypkg"))
        self.assertIn("[pip] Successfully installed tinypkg-1.0", result.stdout.splitlines())
        view = self.toolkit_install("train.py")
        self.assertEqual(view["kind"], "PYTHON_PROGRAM")
        self.assertEqual(result.prepared["kind"], "python_program")
        self.assertEqual([command["cmd"] for command in view["commands"]], [self.our_command(result)])
        self.assertEqual(self.our_command(result), ["python3", "-m", "pip", "install", "-r", "requirements.txt"])

    def test_a_setup_py_package_is_installed_as_the_toolkit_installs_it(self):
        setup = 'from setuptools import setup\nsetup(name="usercode", version="0.1", py_modules=["train"])\n'
        result = self.prepare(self.code_archive({"train.py": TRAIN_PY, "setup.py": setup,
                                                 "requirements.txt": "tinypkg==1.0\n"}))
        self.assertEqual(result.code, 0, result)
        self.assertTrue(self.venv_imports("tinypkg"))
        self.assertIn("usercode", subprocess.run([f"{self.venv()}/bin/python", "-m", "pip", "list"], text=True,
                                                 capture_output=True, timeout=LIMIT).stdout)
        view = self.toolkit_install("train.py")
        self.assertEqual((view["kind"], result.prepared["kind"]), ("PYTHON_PACKAGE", "python_package"))
        self.assertEqual([command["cmd"] for command in view["commands"]], [self.our_command(result)])
        self.assertEqual(self.our_command(result), ["python3", "-m", "pip", "install", ".", "-r", "requirements.txt"])

    def test_a_pyproject_package_is_installed(self):
        # A difference: the toolkit looks for setup.py alone, and takes this folder for a Python program.
        pyproject = ('[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                     '[project]\nname = "usercode"\nversion = "0.2"\n[tool.setuptools]\npy-modules = ["train"]\n')
        result = self.prepare(self.code_archive({"train.py": TRAIN_PY, "pyproject.toml": pyproject}))
        self.assertEqual(result.code, 0, result)
        self.assertEqual(result.prepared["kind"], "python_package")
        self.assertEqual(self.our_command(result), ["python3", "-m", "pip", "install", "."])
        self.assertTrue(self.venv_imports("train"))
        self.assertEqual(self.toolkit_install("train.py")["kind"], "PYTHON_PROGRAM")

    def test_a_pyproject_that_only_configures_tools_is_no_package(self):
        result = self.prepare(self.code_archive({"train.py": TRAIN_PY, "pyproject.toml": "[tool.black]\nline-length = 100\n"}))
        self.assertEqual(result.code, 0, result)
        self.assertEqual(result.prepared["kind"], "python_program")
        self.assertIn("nothing to install", result.prepared["done"][-1])
        self.assertEqual(self.toolkit_install("train.py"), {"kind": "PYTHON_PROGRAM", "commands": []})

    def test_a_command_is_made_executable_as_the_toolkit_makes_it(self):
        files = {"train.sh": "#!/bin/sh\necho hi\n", "bin/run": "#!/bin/sh\necho hi\n", "requirements.txt": "x\n"}
        for program in ("train.sh", "bin/run"):
            with self.subTest(program):
                shutil.rmtree(self.job.code, ignore_errors=True)
                shutil.rmtree(os.path.join(self.work, "toolkit"), ignore_errors=True)
                archive = self.code_archive(files)
                os.chmod(archive, 0o644)
                result = self.prepare(archive, program=program)
                self.assertEqual(result.code, 0, result)
                self.assertEqual(result.prepared["kind"], "command")
                mode = os.stat(os.path.join(self.job.code, program)).st_mode
                self.assertEqual(mode & 0o111, 0o111)
                view = self.toolkit_install(program)
                self.assertEqual(view, {"kind": "COMMAND", "commands": []}, "a command's requirements are not installed")
                self.assertEqual(os.stat(os.path.join(self.work, "toolkit", "code", program)).st_mode & 0o111, 0o111)

    def test_a_requirement_that_does_not_exist(self):
        result = self.prepare(self.code_archive({"train.py": TRAIN_PY, "requirements.txt": "nosuchpkg==1.0\n"}))
        self.assert_refused(result, 69, "The job's code could not be installed",
                            "`python3 -m pip install -r requirements.txt` exited with code 1",
                            "ERROR: Could not find a version that satisfies the requirement nosuchpkg==1.0")
        self.assertIn("ERROR: No matching distribution found for nosuchpkg==1.0", result.failure)

    def test_a_requirement_that_fails_to_build(self):
        result = self.prepare(self.code_archive({"train.py": TRAIN_PY, "requirements.txt": "brokenpkg==1.0\n"}))
        self.assert_refused(result, 69, "The job's code could not be installed", f"at {LINKS}/brokenpkg-1.0.tar.gz")
        self.assertIn("RuntimeError: brokenpkg cannot be built here", result.failure)

    def test_pip_that_runs_out_of_time_is_killed_with_its_group(self):
        pid_file = os.path.join(self.work, "slowpkg.pid")
        result = self.prepare(self.code_archive({"train.py": TRAIN_PY, "requirements.txt": "slowpkg==1.0\n"}),
                              TRAIN_CODE_INSTALL_TIMEOUT_SECONDS="20", SLOWPKG_PID_FILE=pid_file)
        self.assert_refused(result, 124, "within 20 s (TRAIN_CODE_INSTALL_TIMEOUT_SECONDS)",
                            "was ended with its process group")
        with open(pid_file) as file:
            self.assertTrue(process_gone(int(file.read())), "slowpkg's build outlived pip")

    def test_a_stop_signal_ends_pip(self):
        pid_file = os.path.join(self.work, "slowpkg.pid")
        archive = self.code_archive({"train.py": TRAIN_PY, "requirements.txt": "slowpkg==1.0\n"})
        process = subprocess.Popen([TRAIN, "prepare-code", archive, "train.py"], text=True, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=self.environment(SLOWPKG_PID_FILE=pid_file))
        try:
            deadline = time.monotonic() + LIMIT
            while not (os.path.exists(pid_file) and os.path.getsize(pid_file)) and time.monotonic() < deadline:
                time.sleep(0.1)
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=LIMIT)
        finally:
            process.kill()
            process.wait()
        self.assertEqual(process.returncode, 143, stderr)
        self.assertTrue(self.job.failure().startswith("The job was stopped by SIGTERM while its code was installed"))
        with open(pid_file) as file:
            self.assertTrue(process_gone(int(file.read())), "slowpkg's build outlived the stop")

    def test_no_python_for_pip(self):
        result = self.prepare(self.code_archive({"train.py": TRAIN_PY, "requirements.txt": "tinypkg==1.0\n"}),
                              PATH=os.path.join(self.work, "empty"))
        self.assert_refused(result, 69, "cannot run python3")


def never_answering_server():
    """A TCP server on 127.0.0.1 that takes connections and never answers: its port, and a way to stop it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held = []
    stopping = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stopping.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()

    def stop():
        stopping.set()
        thread.join(timeout=10)
        for connection in held:
            connection.close()
        listener.close()
    return listener.getsockname()[1], stop


class FromS3(UserCodeTest):
    s3 = None

    @classmethod
    def setUpClass(cls):
        cls.s3 = LocalS3(MOTO_PYTHON, log_path=os.path.join(WORK, "moto.log"))
        cls.s3.admin.create_bucket(Bucket=BUCKET)
        cls.sourcedir = write_archive(os.path.join(WORK, "s3-sourcedir.tar.gz"), a_job_code)
        with open(cls.sourcedir, "rb") as file:
            cls.s3.admin.put_object(Bucket=BUCKET, Key=KEY, Body=file.read())
        cls.s3.admin.put_object(Bucket=BUCKET, Key="text/sourcedir.tar.gz", Body=b"not an archive\n")
        cls.reader = cls.s3.user_with_policy("reader", [{"Effect": "Allow", "Action": "s3:GetObject",
                                                         "Resource": f"arn:aws:s3:::{BUCKET}/*"}])
        cls.lister = cls.s3.user_with_policy("lister", [{"Effect": "Allow", "Action": "s3:ListBucket",
                                                         "Resource": f"arn:aws:s3:::{BUCKET}"}])

    @classmethod
    def tearDownClass(cls):
        cls.s3.close()

    def keys(self, pair):
        return {"AWS_ACCESS_KEY_ID": pair[0], "AWS_SECRET_ACCESS_KEY": pair[1]}

    def fetch(self, uri=f"s3://{BUCKET}/{KEY}", job=None, **extra):
        extra.setdefault("AWS_ENDPOINT_URL_S3", self.s3.endpoint)
        extra.setdefault("AWS_REGION", "us-east-1")
        return self.prepare(uri, job=job, **extra)

    def test_fetched_with_each_endpoint_setting_as_the_toolkit_fetches_it(self):
        toolkit_job = Job(self.work, "toolkit")
        self.assertEqual(self.toolkit("fetch", f"s3://{BUCKET}/{KEY}", toolkit_job, S3_ENDPOINT_URL=self.s3.endpoint,
                                      AWS_REGION="us-east-1", **self.keys(self.reader)), {"ok": True})
        for variable in ("AWS_ENDPOINT_URL_S3", "S3_ENDPOINT_URL", "AWS_ENDPOINT_URL"):
            with self.subTest(variable):
                job = Job(self.work, variable)
                endpoint = {"AWS_ENDPOINT_URL_S3": ""} if variable != "AWS_ENDPOINT_URL_S3" else {}
                result = self.fetch(job=job, **endpoint, **{variable: self.s3.endpoint}, **self.keys(self.reader))
                self.assertEqual(result.code, 0, result)
                self.assertIn(f"from {self.s3.endpoint} ({variable}), region us-east-1, credentials from the "
                              "environment (AWS_ACCESS_KEY_ID)", result.stderr)
                self.assertIn(f"downloaded s3://{BUCKET}/{KEY} ({os.path.getsize(self.sourcedir)} bytes",
                              result.prepared["done"][0])
                self.assertEqual(tree(job.code), tree(toolkit_job.code))
                self.assertEqual(job.leftovers(), [])

    def test_credentials_from_the_container_credentials_endpoint(self):
        role = self.s3.role_credentials("training-role", [{"Effect": "Allow", "Action": "s3:GetObject",
                                                           "Resource": "*"}])
        with ContainerCredentials(role) as endpoint:
            result = self.fetch(AWS_CONTAINER_CREDENTIALS_FULL_URI=endpoint.uri)
            self.assertGreaterEqual(endpoint.requests, 1)
        self.assertEqual(result.code, 0, result)
        self.assertIn("credentials from the container credentials endpoint", result.prepared["done"][0])
        self.assertEqual(tree(self.job.code)["train.py"], ("file", 0o644, TRAIN_PY))

    def test_an_object_that_does_not_exist(self):
        result = self.fetch(f"s3://{BUCKET}/no/such/sourcedir.tar.gz", **self.keys(self.reader))
        self.assert_refused(result, 65, f"s3://{BUCKET}/no/such/sourcedir.tar.gz: no object no/such/sourcedir.tar.gz "
                                        f"in the bucket {BUCKET}", "NoSuchKey")
        self.assert_no_code()

    def test_a_bucket_that_does_not_exist(self):
        # As the administrator: moto judges the policy before it looks for the bucket.
        result = self.fetch(f"s3://no-such-bucket-train/{KEY}", **self.keys(self.s3.admin_key))
        self.assert_refused(result, 65, "the bucket no-such-bucket-train does not exist", "NoSuchBucket")
        self.assert_no_code()

    def test_access_denied(self):
        result = self.fetch(**self.keys(self.lister))
        self.assert_refused(result, 65, f"s3://{BUCKET}/{KEY}: access denied (S3 said AccessDenied",
                            "credentials from the environment", f"needs s3:GetObject on arn:aws:s3:::{BUCKET}/{KEY}")
        self.assert_no_code()
        role = self.s3.role_credentials("listing-role", [{"Effect": "Allow", "Action": "s3:ListBucket",
                                                          "Resource": "*"}])
        job = Job(self.work, "role")
        with ContainerCredentials(role) as endpoint:
            result = self.fetch(job=job, AWS_CONTAINER_CREDENTIALS_FULL_URI=endpoint.uri)
        self.assert_refused(result, 65, "access denied", "credentials from the container credentials endpoint")
        self.assert_no_code(job)

    def test_credentials_s3_does_not_know(self):
        result = self.fetch(**self.keys(("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")))
        self.assert_refused(result, 65, "S3 refused the credentials from the environment", "InvalidAccessKeyId")

    def test_no_credentials_at_all(self):
        result = self.fetch()
        self.assert_refused(result, 65, f"no AWS credentials found for s3://{BUCKET}/{KEY}",
                            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        self.assert_no_code()

    def test_an_object_that_is_no_archive(self):
        result = self.fetch(f"s3://{BUCKET}/text/sourcedir.tar.gz", **self.keys(self.reader))
        self.assert_refused(result, 65, "is not a tar archive")
        self.assert_no_code()

    def test_s3_out_of_reach(self):
        result = self.fetch(AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{free_port()}", **self.keys(self.reader))
        self.assert_refused(result, 74, "cannot reach S3 at http://127.0.0.1:")
        self.assert_no_code()

    def test_a_fetch_that_runs_out_of_time(self):
        port, stop = never_answering_server()
        try:
            result = self.fetch(AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{port}", TRAIN_CODE_FETCH_TIMEOUT_SECONDS="3",
                                **self.keys(self.reader))
        finally:
            stop()
        self.assert_refused(result, 124, f"could not be fetched from s3://{BUCKET}/{KEY} within 3 s "
                                         "(TRAIN_CODE_FETCH_TIMEOUT_SECONDS)")
        self.assert_no_code()


def setUpModule():
    global WORK, LINKS
    WORK = tempfile.mkdtemp(prefix="train-user-code-module-")
    LINKS = os.path.join(WORK, "links")
    make_links(LINKS)


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    (TRAIN, TOOLKIT_PYTHON, MOTO_PYTHON), argv = paths_and_unittest_argv("--train", "--toolkit-python",
                                                                         "--moto-python")
    unittest.main(argv=argv)
