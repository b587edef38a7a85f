#!/usr/bin/env python3
"""Script mode against the real SageMaker training toolkit (sagemaker-training 5.1.4 in build-toolkit/): for the
same job, the program that `train` runs gets the command line, working folder and SM_* environment the
toolkit's own trainer gives it (`trainer.train()`: its code step, its ProcessRunner).

    /usr/bin/python3 test_script_mode_toolkit.py --train build/train --toolkit-python build-toolkit/bin/python

Each test writes a one-host SageMaker job (SAGEMAKER_BASE_DIR, the host named as this machine) whose code is in its code folder
(sagemaker_submit_directory names that folder, as the SDK's local mode does) and runs it twice: `train`, and
the toolkit's trainer. The program writes down what it got. Documented differences (docs/script-mode-launch.md):
the interpreter (the toolkit's is its own sys.executable, here build-toolkit's; train's is python3), and
what train adds (torchrun's variables, OMP_NUM_THREADS, the launcher's own).
"""
import json
import os
import socket
import subprocess
import sys
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from command_line import paths_and_unittest_argv  # noqa: E402
from job_folder import one_host_resource_config, scratch_job_folder  # noqa: E402

TRAIN = None
TOOLKIT_PYTHON = None
LIMIT = 120

DUMP = textwrap.dedent("""\
    import json, os, sys
    with open(os.path.join(os.environ["TEST_WORK"], os.environ["TEST_WHO"] + ".json"), "w") as out:
        json.dump({"argv": sys.argv, "cwd": os.getcwd(), "environ": dict(os.environ)}, out)
""")
SHELL_DUMP = ("#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > \"$TEST_WORK/$TEST_WHO.txt\"\n"
              "pwd >> \"$TEST_WORK/$TEST_WHO.txt\"\n")
# The host is named as this machine is: the toolkit's trainer waits until every host name resolves.
HOST = socket.gethostname()
ONE_HOST = one_host_resource_config(HOST)
JOB_ENVIRONMENT = {"TRAINING_JOB_NAME": "script-oracle-001", "AWS_REGION": "us-east-2"}
TOOLKIT_TRAIN = "from sagemaker_training import trainer; trainer.train()"


class ScriptModeOracle(unittest.TestCase):
    def setUp(self):
        self.work, self.base = scratch_job_folder(self, "train-script-toolkit-")
        self.code = os.path.join(self.base, "code")
        os.makedirs(self.code)
        os.makedirs(os.path.join(self.base, "input", "data", "train"))

    def write_job(self, program, text, hyperparameters):
        config = os.path.join(self.base, "input", "config")
        os.makedirs(config, exist_ok=True)
        values = {"sagemaker_program": program, "sagemaker_submit_directory": self.code, **hyperparameters}
        documents = {"resourceconfig.json": ONE_HOST, "inputdataconfig.json": {"train": {"TrainingInputMode": "File"}},
                     "hyperparameters.json": {key: json.dumps(value) for key, value in values.items()}}
        for name, document in documents.items():
            with open(os.path.join(config, name), "w") as file:
                json.dump(document, file)
        with open(os.path.join(self.code, program), "w") as file:
            file.write(text)

    def environment(self, who):
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("SM_", "OMPI_", "PMIX_", "TRAIN_", "SAGEMAKER_"))}
        env.update(JOB_ENVIRONMENT, SAGEMAKER_BASE_DIR=self.base, TEST_WORK=self.work, TEST_WHO=who)
        return env

    def run_both(self):
        ours = subprocess.run([TRAIN], env=self.environment("train"), cwd=self.work, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=LIMIT)
        self.assertEqual(ours.returncode, 0, ours.stdout)
        theirs = subprocess.run([TOOLKIT_PYTHON, "-c", TOOLKIT_TRAIN], env=self.environment("toolkit"), cwd=self.work,
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=LIMIT)
        self.assertEqual(theirs.returncode, 0, theirs.stdout)

    def read(self, name):
        with open(os.path.join(self.work, name)) as file:
            return json.load(file)

    def test_a_python_program_gets_the_toolkits_command_line_folder_and_environment(self):
        self.write_job("dump.py", DUMP, {"epochs": 3, "lr": 0.5, "flag": True, "name": "café", "list": [1, 2]})
        self.run_both()
        ours, theirs = self.read("train.json"), self.read("toolkit.json")
        self.assertEqual(ours["argv"], theirs["argv"])
        self.assertEqual(os.path.realpath(ours["cwd"]), os.path.realpath(theirs["cwd"]))
        own = {name: value for name, value in ours["environ"].items() if name.startswith("SM_")}
        toolkit = {name: value for name, value in theirs["environ"].items() if name.startswith("SM_")}
        self.assertEqual(set(own), set(toolkit))
        for name in sorted(toolkit):
            self.assertEqual(own[name], toolkit[name], f"{name}: train's (first), the toolkit's")
        for name in ("CURRENT_HOST", "SAGEMAKER_JOB_NAME", "SAGEMAKER_REGION"):
            self.assertEqual(ours["environ"].get(name), theirs["environ"].get(name), name)

    def test_an_executable_gets_the_toolkits_command_line_and_folder(self):
        self.write_job("run.sh", SHELL_DUMP, {"batch-size": 8, "text": "two words"})
        self.run_both()
        with open(os.path.join(self.work, "train.txt")) as ours, open(os.path.join(self.work, "toolkit.txt")) as theirs:
            ours_lines, their_lines = ours.read().splitlines(), theirs.read().splitlines()
        self.assertEqual(ours_lines[:-1], their_lines[:-1])
        self.assertEqual(os.path.realpath(ours_lines[-1]), os.path.realpath(their_lines[-1]))


if __name__ == "__main__":
    (TRAIN, TOOLKIT_PYTHON), argv = paths_and_unittest_argv("--train", "--toolkit-python")
    unittest.main(argv=argv)
