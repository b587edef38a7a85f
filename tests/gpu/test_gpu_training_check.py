#!/usr/bin/env python3
"""scripts/gpu/gpu_training_check.py with the CPU standing in for the GPU (--device cpu), so that a GPU loan is not
spent on the script's own mistakes (job files, sample logs, checkpoints, digests, log lines it parses): the CPU's
references made from a small Fashion-MNIST folder (--make-references, as make_gpu_bundle.sh makes them: the
accuracy job for each of its seeds), then the accuracy, two-rank and fast-path checks against them pass (the
accuracy check's seeds side by side, their mean equal to the references'); with references altered (every seed's
top-1 by 2.1 points, a sample line, one momentum digest, one loss, one weight value) the accuracy and two-rank
checks fail and say where; one seed's top-1 moved by 3 points moves the mean by 3/seeds, and the check passes (the
means are compared, not the seeds); references made from other data are refused before any job runs.

    test_gpu_training_check.py REPO
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "gpu", "gpu_training_check.py")
TRAIN = os.path.join(REPO, "build", "cpu-only", "train")
sys.path.insert(0, os.path.dirname(SCRIPT))
from gpu_training_check import ACCURACY_SEEDS  # noqa: E402


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
        accuracy = carried["accuracy"]
        self.assertGreaterEqual(len(ACCURACY_SEEDS), 2)
        self.assertEqual(accuracy["seeds"], list(ACCURACY_SEEDS))
        self.assertEqual(accuracy["job"]["seed"], ACCURACY_SEEDS[0])  # the uninterrupted run resume compares with
        self.assertEqual(accuracy["job"]["epochs"], "1")
        self.assertEqual(sorted(accuracy["top1"]), sorted(ACCURACY_SEEDS))
        self.assertTrue(all(0 < value <= 1 for value in accuracy["top1"].values()), accuracy["top1"])
        self.assertAlmostEqual(accuracy["mean"], statistics.fmean(accuracy["top1"].values()), places=6)
        self.assertAlmostEqual(accuracy["spread"], statistics.stdev(accuracy["top1"].values()), places=6)
        self.assertEqual(set(accuracy["steps"].values()), {8})  # 1,000 images at batch 128, one epoch
        for seed in ACCURACY_SEEDS:  # each seed's CPU job was given its seed
            job = "uninterrupted-cpu" if seed == ACCURACY_SEEDS[0] else f"accuracy-cpu-{seed}"
            with open(os.path.join(self.scratch, "cpu", job, "input", "config", "hyperparameters.json")) as f:
                self.assertEqual(json.load(f)["seed"], seed)
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
        # The CPU standing in repeats the references' jobs bit for bit: no difference at all, anywhere.
        self.assertIn("first step's averaged gradient (momentum, 62 tensors): rel L2 0.0e+00 (<= 2e-02), worst "
                      "tensor 0.0e+00", two_ranks)
        self.assertIn("steps 1-2 rel diff 0.0e+00 (<= 2e-03), later steps mean 0.0e+00 (<= 2e-01;", two_ranks)
        self.assertIn("62 parameters rel L2 0.0e+00 (<= 5e-02;", two_ranks)
        self.assertIn("samples per rank identical", two_ranks)
        accuracy = self.accuracy_row(rows)
        self.assertIn(f"mean of {len(ACCURACY_SEEDS)} seeds", accuracy[0])
        self.assertIn(f"{len(ACCURACY_SEEDS)} jobs side by side", accuracy[2])
        # The CPU standing in trains the references' runs again, seed for seed: the same top-1 each.
        seeds = ", ".join(f"{seed} {self.carried['accuracy']['top1'][seed]:.4f}" for seed in ACCURACY_SEEDS)
        self.assertIn(f"mean {statistics.fmean(self.carried['accuracy']['top1'].values()):.4f} (seeds {seeds};",
                      accuracy[2])
        self.assertIn("+0.00 points from the CPU mean", accuracy[2])
        self.assertTrue(os.path.exists(os.path.join(self.scratch, "same", "uninterrupted-cpu.finished")))

    def accuracy_row(self, rows):
        return next((name, verdict, detail) for name, (verdict, detail) in rows.items()
                    if name.startswith("train device=cpu"))

    def write_references(self, references, name):
        folder = os.path.join(self.scratch, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "references.json"), "w") as f:
            json.dump(references, f)
        return folder

    def test_the_means_are_compared_not_each_seed(self):
        altered = json.loads(json.dumps(self.carried))
        moved = ACCURACY_SEEDS[1]
        altered["accuracy"]["top1"][moved] += 0.03  # one seed 3 points off: the mean 3/seeds points
        code, rows, output = self.check("accuracy", self.write_references(altered, "one-seed"), "one-seed")
        name, verdict, detail = self.accuracy_row(rows)
        self.assertEqual((verdict, code), ("PASS", 0), detail)
        self.assertIn(f"{-3 / len(ACCURACY_SEEDS):+.2f} points from the CPU mean", detail)

    def test_the_checks_fail_against_altered_references(self):
        altered = json.loads(json.dumps(self.carried))
        for seed in ACCURACY_SEEDS:  # the mean 2.1 points off, just past the bar
            altered["accuracy"]["top1"][seed] += 0.021
        one, twelve = altered["two_ranks"]["one-step"], altered["two_ranks"]["twelve-steps"]
        one["samples"]["1"] += "a sample the GPU never saw\n"
        name = sorted(one["momentum"])[10]  # one tensor of the averaged gradient 10% off: past its own bar
        one["momentum"][name]["sums"] = [value * 1.1 for value in one["momentum"][name]["sums"]]
        steps = sorted(twelve["losses"], key=int)
        twelve["losses"][steps[1]] = str(float(twelve["losses"][steps[1]]) * 1.01)  # step 2: 1% off
        for step in steps[2:]:  # the later steps 30% off on average: past the bar of this job's fp32 noise
            twelve["losses"][step] = str(float(twelve["losses"][step]) * 1.3)
        for weight in twelve["weights"].values():  # every tensor 10% off after twelve steps
            weight["sums"] = [value * 1.1 for value in weight["sums"]]
            weight["values"] = [value * 1.1 for value in weight["values"]]
        code, rows, output = self.check("accuracy,two-ranks", self.write_references(altered, "altered"), "altered")
        self.assertEqual(code, 1)
        self.assertEqual(len(rows), 2, output[-3000:])
        verdicts = {name.split(",")[0].split(" (")[0]: value for name, value in rows.items()}
        accuracy = next(value for name, value in verdicts.items() if name.startswith("train device=cpu"))
        two_ranks = next(value for name, value in verdicts.items() if name.startswith("two ranks"))
        self.assertEqual(accuracy[0], "FAIL", accuracy[1])
        self.assertIn("-2.10 points from the CPU mean", accuracy[1])
        self.assertEqual(two_ranks[0], "FAIL", two_ranks[1])
        detail = two_ranks[1]
        self.assertIn("one-step: samples per rank DIFFER", detail)
        self.assertIn("twelve-steps: samples per rank identical", detail)
        found = re.search(r"averaged gradient \(momentum, 62 tensors\): rel L2 (\S+) \(<= 2e-02\), worst tensor "
                          r"(\S+) \(<= 5e-02, (\S+)\)", detail)
        self.assertTrue(found and float(found.group(2)) > 5e-2 and found.group(3) == name, detail)
        found = re.search(r"losses at \d+ of \d+ log lines: steps 1-2 rel diff (\S+) \(<= 2e-03\), later steps "
                          r"mean (\S+) \(<= 2e-01;", detail)
        self.assertTrue(found and 9e-3 < float(found.group(1)) < 1.1e-2, detail)
        self.assertTrue(found and 0.2 < float(found.group(2)) < 0.25, detail)
        found = re.search(r"\d+ parameters rel L2 (\S+) \(<= 5e-02;", detail)
        self.assertTrue(found and float(found.group(1)) > 5e-2, detail)

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
