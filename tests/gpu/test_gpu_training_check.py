#!/usr/bin/env python3
"""scripts/gpu/gpu_training_check.py with the CPU standing in for the GPU (--device cpu), so that a GPU loan is not
spent on the script's own mistakes (job files, sample logs, checkpoints, digests, log lines it parses): the CPU's
references made from a small Fashion-MNIST folder (--make-references, as make_gpu_bundle.sh makes them), then the
accuracy, two-rank and fast-path checks against them pass; with references altered (the top-1 by 5 points, a
sample line, one momentum digest, one loss, one weight value) the accuracy and two-rank checks fail and say
where; references made from other data are refused before any job runs.

    test_gpu_training_check.py REPO
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "gpu", "gpu_training_check.py")
TRAIN = os.path.join(REPO, "build", "cpu-only", "train")


def rows_of(output):
    return {name: (verdict, detail) for _, name, verdict, detail in
            (line.split("|", 3) for line in output.splitlines() if line.startswith("CHECK|"))}


class GpuTrainingCheckOnTheCpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.mkdtemp(prefix="gpu-training-check-test-")
        cls.data = os.path.join(cls.scratch, "fashion")
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "make_fashion_mnist_folder.py"),
                        "--limit", "1000", cls.data], check=True, stdout=subprocess.DEVNULL)
        cls.references = os.path.join(cls.scratch, "references")
        made = subprocess.run([sys.executable, SCRIPT, "--make-references", cls.references, "--data", cls.data,
                               "--train", TRAIN, "--epochs", "1", "--work", os.path.join(cls.scratch, "cpu")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
        assert made.returncode == 0, made.stdout[-3000:]
        with open(os.path.join(cls.references, "references.json")) as f:
            cls.carried = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def check(self, checks, references, work, data=None):
        result = subprocess.run(
            [sys.executable, SCRIPT, "--data", data or self.data, "--references", references, "--train", TRAIN,
             "--device", "cpu", "--checks", checks, "--fast-steps", "12", "--work", os.path.join(self.scratch, work)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
        return result.returncode, rows_of(result.stdout), result.stdout

    def test_the_references_hold_what_the_checks_compare(self):
        carried = self.carried
        self.assertEqual(carried["data"]["images"], {"train": 1000, "validation": 1000})
        self.assertGreater(carried["accuracy"]["top1"], 0)
        self.assertEqual(carried["accuracy"]["job"]["epochs"], "1")
        one, twelve = carried["two_ranks"]["one-step"], carried["two_ranks"]["twelve-steps"]
        self.assertEqual(one["state"]["step"], 1)
        self.assertEqual(len(one["momentum"]), 62)  # ResNet-18's parameters
        self.assertEqual(twelve["state"]["step"], 12)
        self.assertGreaterEqual(len(twelve["losses"]), 5)
        self.assertEqual(len(one["samples"]["0"].splitlines()), len(one["samples"]["1"].splitlines()))
        size = os.path.getsize(os.path.join(self.references, "references.json"))
        self.assertLess(size, 2 * 1024 * 1024, "the references would not fit the bundle's budget")

    def test_the_checks_pass_against_references_of_the_same_jobs(self):
        code, rows, output = self.check("accuracy,two-ranks,fast", self.references, "same")
        self.assertEqual(len(rows), 3, output[-3000:])
        for name, (verdict, detail) in rows.items():
            self.assertEqual(verdict, "PASS", f"{name}: {detail}")
        self.assertEqual(code, 0)
        two_ranks = next(detail for name, (_, detail) in rows.items() if name.startswith("two ranks"))
        self.assertIn("first step's averaged gradient (momentum, 62 tensors): worst rel L2 0.0e+00", two_ranks)
        self.assertIn("samples per rank identical", two_ranks)

    def test_the_checks_fail_against_altered_references(self):
        altered = json.loads(json.dumps(self.carried))
        altered["accuracy"]["top1"] += 0.05
        one, twelve = altered["two_ranks"]["one-step"], altered["two_ranks"]["twelve-steps"]
        one["samples"]["1"] += "a sample the GPU never saw\n"
        name = sorted(one["momentum"])[10]
        one["momentum"][name]["sums"] = [value * 1.01 for value in one["momentum"][name]["sums"]]
        step = sorted(twelve["losses"], key=int)[-1]
        twelve["losses"][step] = str(float(twelve["losses"][step]) * 1.01)
        weight = sorted(twelve["weights"])[3]
        twelve["weights"][weight]["values"][7] += 1.0
        folder = os.path.join(self.scratch, "altered")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "references.json"), "w") as f:
            json.dump(altered, f)
        code, rows, output = self.check("accuracy,two-ranks", folder, "altered")
        self.assertEqual(code, 1)
        self.assertEqual(len(rows), 2, output[-3000:])
        verdicts = {name.split(",")[0].split(" (")[0]: value for name, value in rows.items()}
        accuracy = next(value for name, value in verdicts.items() if name.startswith("train device=cpu"))
        two_ranks = next(value for name, value in verdicts.items() if name.startswith("two ranks"))
        self.assertEqual(accuracy[0], "FAIL", accuracy[1])
        self.assertEqual(two_ranks[0], "FAIL", two_ranks[1])
        detail = two_ranks[1]
        self.assertIn("one-step: samples per rank DIFFER", detail)
        self.assertIn("twelve-steps: samples per rank identical", detail)
        found = re.search(r"averaged gradient \(momentum, 62 tensors\): worst rel L2 (\S+) \(<= 1e-3, (\S+)\)", detail)
        self.assertTrue(found and float(found.group(1)) > 5e-3 and found.group(2) == name, detail)
        found = re.search(r"losses at \d+ of \d+ log lines: worst rel diff (\S+) ", detail)
        self.assertTrue(found and 9e-3 < float(found.group(1)) < 1.1e-2, detail)
        found = re.search(r"weights worst rel L2 (\S+) \(<= 1e-2\)", detail)
        self.assertTrue(found and float(found.group(1)) > 1e-2, detail)

    def test_references_of_other_data_are_refused_before_any_job(self):
        other = os.path.join(self.scratch, "other-data")
        shutil.copytree(self.data, other)
        victim = os.path.join(other, "train", sorted(os.listdir(os.path.join(other, "train")))[0])
        os.remove(os.path.join(victim, sorted(os.listdir(victim))[0]))
        code, rows, output = self.check("accuracy,two-ranks", self.references, "other", data=other)
        self.assertEqual(code, 1)
        self.assertEqual([verdict for verdict, _ in rows.values()], ["FAIL", "FAIL"], output)
        for verdict, detail in rows.values():
            self.assertIn("was made from other data", detail)
        self.assertFalse(os.path.exists(os.path.join(self.scratch, "other", "uninterrupted-cpu")))


if __name__ == "__main__":
    unittest.main()
