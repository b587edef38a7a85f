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
