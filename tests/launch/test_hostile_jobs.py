#!/usr/bin/env python3
"""Issue 31's third adversarial probe, the part about what a job leaves and what it cannot pass on: the real
`train` against jobs that leave temporaries of a killed writer, hyperparameters no command line can carry,
executables that are not, no PATH, a killed mpirun, paths that lead outside the job, each with what train
must do and its exit code, as docs/faults.md's fault table lists them.

    python3 test_hostile_jobs.py --train /path/to/train [unittest arguments]

The jobs are test_faults.py's (a one-host job of 2 ranks, ResNet-18 on 16x16 images, or `train -- CMD`), run as
root as the launch tests are.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_launch  # noqa: E402
from test_faults import SMALL, FaultCase  # noqa: E402


class KilledWriters(FaultCase):
    def test_temporaries_of_a_killed_model_write_are_swept_by_the_restart(self):
        # A SIGKILL while rank 0 writes the model leaves model.safetensors.tmp-XXXXXX (and, a moment later, model.json's);
        # the restart that succeeded kept them, and SageMaker would ship them in model.tar.gz. Planted here as the kill
        # leaves them: the temporary names train's writer makes, with part of a model in one.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True, help="the train executable to test")
    args, rest = parser.parse_known_args()
    test_launch.TRAIN = os.path.abspath(args.train)
    if os.geteuid() != 0:
        sys.exit("test_hostile_jobs.py: needs root, as the launch tests do")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
