#!/usr/bin/env python3
"""scripts/gpu/gpu_training_check.py with the CPU standing in for the GPU (--device cpu): its fast-path and
two-rank checks run train for real on a small Fashion-MNIST folder and must pass, so that a GPU loan is not
spent on the script's own mistakes (job files, sample logs, checkpoints, log lines it parses).

    test_gpu_training_check.py REPO
"""
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class GpuTrainingCheckOnTheCpu(unittest.TestCase):
    def test_fast_path_and_two_ranks_pass_with_the_cpu_standing_in(self):
        with tempfile.TemporaryDirectory() as scratch:
            data = os.path.join(scratch, "fashion")
            subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "make_fashion_mnist_folder.py"), "--limit",
                            "1000", data], check=True, stdout=subprocess.DEVNULL)
            result = subprocess.run(
                [sys.executable, os.path.join(REPO, "scripts", "gpu", "gpu_training_check.py"), "--data", data, "--train",
                 os.path.join(REPO, "build", "cpu-only", "train"), "--device", "cpu", "--checks", "fast,two-ranks",
                 "--fast-steps", "12", "--work", os.path.join(scratch, "work")],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
            rows = [line.split("|") for line in result.stdout.splitlines() if line.startswith("CHECK|")]
            self.assertEqual(len(rows), 2, result.stdout[-3000:])
            for _, name, verdict, detail in rows:
                self.assertEqual(verdict, "PASS", f"{name}: {detail}")
            self.assertEqual(result.returncode, 0, result.stdout[-3000:])
            two_ranks = next(detail for _, name, _, detail in rows if name.startswith("two ranks"))
            self.assertIn("first step's averaged gradient", two_ranks)
            self.assertIn("samples per rank identical", two_ranks)


if __name__ == "__main__":
    unittest.main()
