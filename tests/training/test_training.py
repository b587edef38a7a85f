"""Training end to end with the real `train` binary on this host (CPU ranks under mpirun).

- a job stopped by SIGTERM mid-epoch checkpoints, and the restarted job ends with bit-identical weights
  to an uninterrupted one;
- Fashion-MNIST (Debian's dataset-fashion-mnist, converted to an image folder) is learnt by 2 ranks to a
  validation accuracy far above chance (10 classes: 10 %);
- model.safetensors loads into torchvision with strict load_state_dict and gives the logits train's own
  inference gives;
- a `model` channel starts training from given weights, re-initialising only the classifier when the
  number of classes differs.

Run: /usr/bin/python3 test_training.py --train PATH --model-check PATH
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from safetensors_numpy import read_safetensors, write_safetensors  # noqa: E402
from stop_at_step import stop_at_step  # noqa: E402
import torch
import torchvision

TRAIN = None
MODEL_CHECK = None
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Accuracy Fashion-MNIST must reach (chance is 0.10); the figure reached is printed.
FASHION_MNIST_MINIMUM_TOP1 = 0.60


def make_job(base, hyperparameters, channels=None):
    config = os.path.join(base, "input", "config")
    os.makedirs(config, exist_ok=True)
    with open(os.path.join(config, "resourceconfig.json"), "w") as f:
        json.dump({"current_host": "algo-1", "hosts": ["algo-1"]}, f)
    with open(os.path.join(config, "hyperparameters.json"), "w") as f:
        json.dump({key: str(value) for key, value in hyperparameters.items()}, f)
    channels = channels or {}
    with open(os.path.join(config, "inputdataconfig.json"), "w") as f:
        json.dump({name: {"TrainingInputMode": "File"} for name in channels}, f)
    for name, path in channels.items():
        os.makedirs(os.path.join(base, "input", "data"), exist_ok=True)
        os.symlink(path, os.path.join(base, "input", "data", name))


def environment(base):
    env = dict(os.environ)
    env["SAGEMAKER_BASE_DIR"] = base
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_train(base, timeout=600):
    result = subprocess.run([TRAIN], env=environment(base), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=timeout)
    return result.returncode, result.stdout


SYNTHETIC = {"data_format": "synthetic", "num_classes": 10, "num_layers": 18, "image_shape": "3,16,16",
             "mini_batch_size": 8, "processes_per_host": 2, "max_steps": 10, "checkpoint_frequency": 0,
             "learning_rate": 0.2, "seed": 3}


class Training(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory()
        cls.reference = os.path.join(cls.work.name, "reference")
        make_job(cls.reference, SYNTHETIC)
        code, output = run_train(cls.reference)
        if code != 0:
            raise AssertionError(f"the uninterrupted synthetic run failed ({code}):\n{output}")

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def test_resume_after_sigterm_is_bit_identical(self):
        base = os.path.join(self.work.name, "interrupted")
        make_job(base, SYNTHETIC)
        process = subprocess.Popen([TRAIN], env=environment(base), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
        code, seen, found = stop_at_step(process, 4, timeout=300)
        output = "".join(seen)
        self.assertTrue(found, f"no step=4 line within 300 s\n{output}")
        self.assertEqual(code, 143, output)
        stopped = [line for line in seen if "stopped at step" in line]
        self.assertTrue(stopped, output)
        stop_step = int(stopped[0].split("stopped at step ")[1].split()[0])
        self.assertLess(stop_step, SYNTHETIC["max_steps"], output)
        self.assertTrue(os.path.exists(os.path.join(base, "checkpoints", "checkpoint.safetensors")))
        self.assertFalse(os.path.exists(os.path.join(base, "model", "model.safetensors")), "a stopped job wrote a model")

        code, output = run_train(base)
        self.assertEqual(code, 0, output)
        self.assertIn(f"resuming from", output)
        self.assertIn(f"step {stop_step}", output)
        with open(os.path.join(self.reference, "model", "model.safetensors"), "rb") as f:
            uninterrupted = f.read()
        with open(os.path.join(base, "model", "model.safetensors"), "rb") as f:
            resumed = f.read()
        self.assertEqual(uninterrupted, resumed, "resumed weights differ from the uninterrupted run's")
        print(f"\nstopped at step {stop_step} of {SYNTHETIC['max_steps']}, resumed: weights bit-identical", flush=True)

    def test_shared_gradient_buffers_train_the_same_model(self):
        """TRAIN_SHARED_GRADIENT_BUFFERS=1 shares gradient buffers whose lifetimes do not overlap: the same bytes,
        less memory."""
        base = os.path.join(self.work.name, "shared_gradient_buffers")
        make_job(base, SYNTHETIC)
        env = environment(base)
        env["TRAIN_SHARED_GRADIENT_BUFFERS"] = "1"
        result = subprocess.run([TRAIN], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=600)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertIn("shared by lifetime (TRAIN_SHARED_GRADIENT_BUFFERS=1)", result.stdout)
        with open(os.path.join(self.reference, "model", "model.safetensors"), "rb") as f:
            reference = f.read()
        with open(os.path.join(base, "model", "model.safetensors"), "rb") as f:
            fast = f.read()
        self.assertEqual(reference, fast, "TRAIN_SHARED_GRADIENT_BUFFERS=1 trained different weights")
        env["TRAIN_SHARED_GRADIENT_BUFFERS"] = "yes"
        result = subprocess.run([TRAIN], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=120)
        self.assertEqual(result.returncode, 65, result.stdout)
        self.assertIn('TRAIN_SHARED_GRADIENT_BUFFERS: expected 0 or 1, got "yes"', result.stdout)

    def assert_torchvision_agrees(self, path, depth, classes, size):
        """`path` loads strictly into torchvision's resnet<depth>, whose inference logits equal train's."""
        tensors = read_safetensors(path)
        model = getattr(torchvision.models, f"resnet{depth}")(num_classes=classes)
        model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()}, strict=True)
        model.eval()
        images = torch.randn(3, 3, size, size)
        with torch.no_grad():
            expected = model(images).numpy()
        batch = os.path.join(self.work.name, f"images{depth}.safetensors")
        out = os.path.join(self.work.name, f"logits{depth}.safetensors")
        write_safetensors(batch, {"images": images.permute(0, 2, 3, 1).numpy()})
        subprocess.run([MODEL_CHECK, "infer", str(depth), str(classes), path, batch, out], check=True, timeout=120)
        error = np.linalg.norm(read_safetensors(out)["eval_logits"] - expected) / np.linalg.norm(expected)
        self.assertLess(error, 1e-5, f"train's inference and torchvision's resnet{depth} disagree")
        print(f"\ntrain's ResNet-{depth} model.safetensors loads strictly into torchvision.models.resnet{depth}; "
              f"logits agree to {error:.1e}", flush=True)

    def test_model_file_loads_into_torchvision(self):
        model_dir = os.path.join(self.reference, "model")
        with open(os.path.join(model_dir, "model.json")) as f:
            description = json.load(f)
        self.assertEqual(description["arch"], "resnet18")
        self.assertEqual(description["num_classes"], 10)
        self.assertEqual(description["input_shape"], [3, 16, 16])
        self.assert_torchvision_agrees(os.path.join(model_dir, "model.safetensors"), 18, 10, 16)

    def test_resnet50_model_file_loads_into_torchvision_resnet50(self):
        base = os.path.join(self.work.name, "resnet50")
        make_job(base, dict(SYNTHETIC, num_layers=50, image_shape="3,64,64", processes_per_host=1, mini_batch_size=8,
                            max_steps=1))
        code, output = run_train(base)
        self.assertEqual(code, 0, output)
        self.assert_torchvision_agrees(os.path.join(base, "model", "model.safetensors"), 50, 10, 64)

    def test_model_channel_starts_from_weights(self):
        base = os.path.join(self.work.name, "finetune")
        weights = os.path.join(self.work.name, "weights")
        os.makedirs(weights)
        os.link(os.path.join(self.reference, "model", "model.safetensors"), os.path.join(weights, "model.safetensors"))
        make_job(base, dict(SYNTHETIC, num_classes=7, max_steps=2), {"model": weights})
        code, output = run_train(base)
        self.assertEqual(code, 0, output)
        self.assertIn("started from the weights in", output)
        self.assertIn("fc.", output)  # the note about the re-initialised classifier
        trained = read_safetensors(os.path.join(base, "model", "model.safetensors"))
        self.assertEqual(list(trained["fc.weight"].shape), [7, 512])

    def test_fashion_mnist_learns_with_two_ranks(self):
        data = os.path.join(self.work.name, "fashion-mnist")
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "make_fashion_mnist_folder.py"), "--limit", "2000",
                        data], check=True, stdout=subprocess.DEVNULL, timeout=300)
        base = os.path.join(self.work.name, "fashion")
        make_job(base, {"num_layers": 18, "image_shape": "3,28,28", "mini_batch_size": 64, "processes_per_host": 2,
                        "epochs": 2, "learning_rate": 0.2, "warmup_epochs": 0.3, "augmentation_type": "none",
                        "checkpoint_frequency": 0},
                 {"train": os.path.join(data, "train"), "validation": os.path.join(data, "validation")})
        started = time.monotonic()
        code, output = run_train(base, timeout=900)
        self.assertEqual(code, 0, output)
        results = [line for line in output.splitlines() if "validation_top1=" in line]
        self.assertEqual(len(results), 2, output)
        top1 = float(results[-1].split("validation_top1=")[1].split()[0])
        print(f"\nFashion-MNIST, 2000 training images, 2 epochs, 2 ranks: validation top-1 {top1:.3f} "
              f"in {time.monotonic() - started:.0f} s", flush=True)
        self.assertGreater(top1, FASHION_MNIST_MINIMUM_TOP1, output)


if __name__ == "__main__":
    arguments = sys.argv[1:]
    for flag in ("--train", "--model-check"):
        if flag not in arguments:
            sys.exit("usage: test_training.py --train PATH --model-check PATH")
    TRAIN = arguments[arguments.index("--train") + 1]
    MODEL_CHECK = arguments[arguments.index("--model-check") + 1]
    unittest.main(argv=[sys.argv[0]], verbosity=2)
