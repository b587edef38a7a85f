#!/usr/bin/env python3
"""Issue 31's third adversarial probe, the part about what a job leaves and what it cannot pass on: the real
`train` against jobs that leave temporaries of a killed writer, hyperparameters no command line can carry,
executables that are not, no PATH, a killed mpirun, paths that lead outside the job, each with what train
must do and its exit code, as docs/faults.md's fault table lists them.

    python3 test_hostile_jobs.py --train /path/to/train [unittest arguments]

The jobs are test_faults.py's (a one-host job of 2 ranks, ResNet-18 on 16x16 images, or `train -- CMD`), run as
root as the launch tests are.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_launch  # noqa: E402
from test_faults import SMALL, SYNTHETIC, FaultCase  # noqa: E402
from test_launch import processes_with_token  # noqa: E402


class KilledWriters(FaultCase):
    def test_temporaries_of_a_killed_model_write_are_swept_by_the_restart(self):
        # A SIGKILL while rank 0 writes the model leaves model.safetensors.tmp-XXXXXX (and, a moment later,
        # model.json's); the restart that succeeded kept them, and SageMaker would ship them in model.tar.gz. Planted
        # here as the kill leaves them: the temporary names train's writer makes, with part of a model in one.
        self.job(dict(SMALL, checkpoint_frequency="1"), {"train": self.folder()})
        self.assert_exit_code(self.run_job(), 0)
        model = os.path.join(self.base, "model")
        with open(os.path.join(model, "model.safetensors"), "rb") as f:
            half = f.read()[:100_000]
        ours = {"model.safetensors.tmp-aB3xYz": half, "model.json.tmp-Q1w2E3": b"{"}
        users = {"model.safetensors.tmp-notes.txt": b"mine", "README.tmp-abc123": b"mine", "model.json.tmp-12345": b"x"}
        for name, content in {**ours, **users}.items():
            with open(os.path.join(model, name), "wb") as f:
                f.write(content)
        shutil.rmtree(os.path.join(self.base, "output"))
        self.assert_exit_code(self.run_job(), 0)  # resumes from the last checkpoint and writes the model again
        self.assertEqual(sorted(os.listdir(model)), sorted({"model.safetensors", "model.json", *users}), self.logs())
        self.assert_nothing_left()


class WhatNoCommandLineCarries(FaultCase):
    def write_hyperparameters(self, text):
        config = os.path.join(self.base, "input", "config")
        os.makedirs(config, exist_ok=True)
        with open(os.path.join(config, "resourceconfig.json"), "w") as f:
            json.dump({"current_host": "algo-1", "hosts": ["algo-1"]}, f)
        with open(os.path.join(config, "hyperparameters.json"), "w") as f:
            f.write(text)

    def test_a_nul_in_a_key_or_value_is_refused_naming_them(self):
        # The value was cut at the NUL in the arguments and SM_HP_X (SM_HPS kept it); the key became --a.
        self.write_hyperparameters('{"x": "a\\u0000b", "a\\u0000b": "1", "fine": "2"}')
        command = ["--", "sh", "-c", 'touch "$TEST_WORK/ran.$OMPI_COMM_WORLD_RANK"']
        validate = subprocess.run([test_launch.TRAIN, "validate", self.base] + command, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=60, env=self.environment())
        self.assertEqual(validate.returncode, 65, validate.stdout)
        for said in ("hyperparameter `a\\u0000b`: its name holds a NUL character",
                     'hyperparameter `x`: its value "a\\u0000b" holds a NUL character, which its argument and SM_HP_X '
                     "cannot carry"):
            self.assertIn(said, validate.stdout)
        code = self.run_job(args=command)
        text = self.assert_failed(code, 65, r"^The job description is invalid: ",
                                  "hyperparameter `a\\u0000b`: its name holds a NUL character",
                                  "hyperparameter `x`: its value")
        self.assertNotIn("fine", text)
        self.assertFalse([name for name in os.listdir(self.work) if name.startswith("ran.")], "a rank ran")


class ExecutablesThatAreNot(FaultCase):
    """`train -- PROGRAM` with a PROGRAM the kernel will not run (ENOEXEC): glibc's execvp ran it through /bin/sh."""

    def program(self, name, content):
        path = os.path.join(self.work, name)
        with open(path, "wb") as f:
            f.write(content)
        os.chmod(path, 0o755)
        return path

    def assert_exec_format_error(self, program):
        self.job({"processes_per_host": "2"})
        code = self.run_job(args=["--", program, "--flag"])
        text = self.assert_failed(code, 69, r"^Rank [01] of 2 on host algo-1 exited with code 69\.$",
                                  f"cannot run {program}: Exec format error")
        self.assertNotIn("Syntax error", text + self.logs())
        return text

    def test_an_executable_for_another_architecture(self):
        # /bin/true with its ELF header's machine set to AArch64 (183): the kernel refuses it.
        with open("/bin/true", "rb") as f:
            elf = bytearray(f.read())
        elf[18:20] = (183).to_bytes(2, "little")
        self.assert_exec_format_error(self.program("other-arch", bytes(elf)))

    def test_a_damaged_executable(self):
        # Half an ELF header, and bytes that are no text: neither the kernel nor a shell can run them.
        self.assert_exec_format_error(self.program("truncated", b"\x7fELF\x02\x01\x01"))
        self.assert_exec_format_error(self.program("garbage", b"\x93\x02(\xc7)\x11\x05 garbage\n"))

    def test_a_script_without_a_shebang_still_runs_through_sh(self):
        # What execvp has always done, and a shell does, with a text file the kernel does not know: kept.
        script = self.program("no-shebang", b'echo "ran $1 as $0" > "$TEST_WORK/ran.$OMPI_COMM_WORLD_RANK"\n')
        self.job({"processes_per_host": "2"})
        self.assert_exit_code(self.run_job(args=["--", script, "one"]), 0)
        for rank in (0, 1):
            with open(os.path.join(self.work, f"ran.{rank}")) as f:
                self.assertEqual(f.read(), f"ran one as {script}\n")
        self.assert_nothing_left()

    def test_a_script_with_a_shebang_whose_interpreter_is_not_a_program(self):
        # The kernel read the #! line and could not run what it names: a shell script it is not.
        interpreter = self.program("not-an-interpreter", b"\x01\x02\x03\n")
        self.assert_exec_format_error(self.program("script", f"#!{interpreter}\necho hello\n".encode()))


class NoPath(FaultCase):
    def test_a_job_without_path_runs_with_dockers_default(self):
        # With no PATH at all mpirun found no ssh for its (unused) rsh launcher and ended: exit 243, "plm_rsh_agent:
        # ssh : rsh ... could not be found". The job's processes get Docker's default PATH, and the log says so.
        self.job({"processes_per_host": "2"})
        env = self.environment()
        del env["PATH"]
        self.stdout_file = open(self.stdout_path, "wb")
        self.stderr_file = open(self.stderr_path, "wb")
        self.addCleanup(self.stdout_file.close)
        self.addCleanup(self.stderr_file.close)
        command = ["--", "sh", "-c", 'echo "$PATH" > "$TEST_WORK/path.$OMPI_COMM_WORLD_RANK"']
        self.process = subprocess.Popen([test_launch.TRAIN] + command, env=env, stdin=subprocess.DEVNULL,
                                        stdout=self.stdout_file, stderr=self.stderr_file, cwd=self.work)
        self.assert_exit_code(self.finish(), 0)
        default = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        for rank in (0, 1):
            with open(os.path.join(self.work, f"path.{rank}")) as f:
                self.assertEqual(f.read(), default + "\n")
        self.assertIn(f"PATH is not set: the job's processes get {default}", self.logs())
        self.assert_nothing_left()


class KilledMpirun(FaultCase):
    def test_what_a_killed_mpirun_leaves_is_removed_by_the_next_job(self):
        # mpirun SIGKILLed while train lives leaves its session folder ($TMPDIR/ompi.HOST.UID/pid.MPIRUN) and the
        # ranks' shared-memory segments (/dev/shm/vader_segment.HOST.*). In a mount namespace with a /dev/shm of its
        # own (a holder process keeps it) and a TMPDIR of the test's own; the next job removes both, and nothing of
        # a live process: a session folder whose mpirun runs, one whose files a process maps.
        _, shm, inside = test_launch.private_dev_shm(self)
        tmp = os.path.join(self.base, "tmp")
        os.makedirs(tmp)
        sessions = os.path.join(tmp, f"ompi.{socket.gethostname()}.{os.getuid()}")
        self.job(SYNTHETIC)
        self.start_command(inside + [test_launch.TRAIN], {"OMP_NUM_THREADS": "1", "TMPDIR": tmp})
        self.wait_for_output("step=2 ")
        mpirun = [pid for pid, command in processes_with_token(self.token)
                  if os.path.basename(command.split(" ")[0]) == "mpirun"]
        self.assertEqual(len(mpirun), 1, processes_with_token(self.token))
        os.kill(mpirun[0], signal.SIGKILL)
        self.assertNotEqual(self.finish(60), 0)
        self.assert_nothing_left()
        left_sessions = sorted(os.listdir(sessions))
        self.assertEqual(left_sessions, [f"pid.{mpirun[0]}"])
        left_segments = sorted(name for name in os.listdir(shm) if name.startswith("vader_segment."))
        self.assertTrue(left_segments, os.listdir(shm))
        # What a live job holds: the session folder of a running mpirun (this holder stands in for one: its name is
        # all that is looked at, with what is mapped), and one whose file a process maps.
        live = subprocess.Popen(["sh", "-c", "exec -a mpirun sleep 600"])
        self.addCleanup(live.wait)
        self.addCleanup(live.kill)
        os.makedirs(os.path.join(sessions, f"pid.{live.pid}", "0"))
        mapped = os.path.join(sessions, "pid.999999999", "hwloc.sm")
        os.makedirs(os.path.dirname(mapped))
        mapper = test_launch.map_until_the_end(self, mapped)
        an_hour_ago = time.time() - 3600
        for root in (shm, sessions):
            for folder, names, files in os.walk(root):
                for name in names + files:
                    os.utime(os.path.join(folder, name), (an_hour_ago, an_hour_ago))
        self.job(dict(SYNTHETIC, max_steps="2"))
        self.start_command(inside + [test_launch.TRAIN], {"OMP_NUM_THREADS": "1", "TMPDIR": tmp})
        self.assert_exit_code(self.finish(120), 0)
        self.assertIn(f"pid.{mpirun[0]}", self.stderr_text(), self.logs())
        now = os.listdir(shm)
        for name in left_segments:
            self.assertNotIn(name, now)
        self.assertEqual(sorted(os.listdir(sessions)), sorted([f"pid.{live.pid}", "pid.999999999"]))
        for process in (mapper, live):  # the mapper's command line names the job's folder
            process.kill()
            process.wait()
        self.assert_nothing_left()


class PathsOutOfTheJob(FaultCase):
    def test_a_checkpoint_local_path_climbing_out_of_opt_ml_is_refused_in_a_relocated_job(self):
        # It was normalised first (/opt/ml/checkpoints/../../x is /x) and then not mapped into SAGEMAKER_BASE_DIR:
        # the relocated job wrote its checkpoints to /x on the host.
        escape = f"/train-escape-{self.token}"
        self.addCleanup(shutil.rmtree, escape, ignore_errors=True)
        self.job(dict(SMALL, checkpoint_frequency="1"), {"train": self.folder()})
        with open(os.path.join(self.base, "input", "config", "checkpointconfig.json"), "w") as f:
            json.dump({"LocalPath": f"/opt/ml/checkpoints/../..{escape}", "S3Uri": "s3://bucket/checkpoints"}, f)
        code = self.run_job()
        self.assert_failed(code, 65, r"^The job description is invalid: ",
                           f'"LocalPath": "/opt/ml/checkpoints/../..{escape}" leads out of /opt/ml through ".."')
        self.assertFalse(os.path.exists(escape))


    def test_a_symlinked_output_data_is_not_followed(self):
        # metrics.json (and the timeline) went wherever a link in output/data's place pointed, outside the job.
        outside = os.path.join(self.work, "outside")
        os.makedirs(outside)
        os.makedirs(os.path.join(self.base, "output"))
        os.symlink(outside, os.path.join(self.base, "output", "data"))
        self.job(dict(SMALL, timeline_steps="2"), {"train": self.folder()})
        self.assert_exit_code(self.run_job(), 0)
        self.assertEqual(os.listdir(outside), [], self.logs())
        data = os.path.join(self.base, "output", "data")
        self.assertIn(f"warning: cannot write {data}/metrics.json: {data} is a symbolic link (to {outside}), which "
                      "train does not follow: its outputs stay in the job's folders; replace the link with a folder",
                      self.logs())
        self.assertIn(f"timeline: could not write {data}/timeline/", self.logs())
        self.assertTrue(os.path.exists(self.output_path("success")))
        self.assert_nothing_left()


def main():
    test_launch.run_root_tests(__doc__, "test_hostile_jobs.py", "as the launch tests do")


if __name__ == "__main__":
    main()
