"""train's CPU ResNet against torchvision, the specification of the model.

The same weights (through safetensors) and the same batch go into both. Compared after one
training-mode step: the loss, the gradient of every parameter (161 tensors for ResNet-50), the updated BN
running statistics and counters, and inference-mode logits after the step.

PyTorch runs in float64, the exact answer for these weights. train's model runs twice:
- in double (the very same model code, instantiated for fp64): everything must agree to 1e-9
  (relative L2 error per tensor, ||train - torch|| / ||torch||);
- in float, as it trains: loss 1e-5, BN running statistics 1e-4, inference logits 1e-4, and every
  gradient max(1e-4, 5x PyTorch float32's own error) against float64, both taken on train's decisions: a ReLU input or a max-pool candidate within
  float32's rounding of a tie may be decided either way by any float32 implementation (PyTorch's own
  float32 flips one in about half of such batches), and one flip moves a whole gradient path by ~1e-2;
  so float64 runs on train's decisions (model_check exports them), and every decision float64 takes
  otherwise must be within float32's noise of a tie (torch_reference.py; tests/model/train_step_sweep.py
  does the same for whole train jobs).

Run: /usr/bin/python3 test_model_vs_torch.py --model-check PATH
"""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from safetensors_numpy import read_safetensors, write_safetensors  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import AMBIGUITY, StepReference, decisions_of, initial_model, relative  # noqa: E402
from torch_reference import tolerance as float32_tolerance  # noqa: E402
import torch
import torch.nn.functional as F

MODEL_CHECK = None
TOLERANCE = {
    "double": {"loss": 1e-9, "gradient": 1e-9, "running": 1e-9, "logits": 1e-9},
    # gradients: at least this, or 5x PyTorch float32's own error, on train's decisions (torch_reference.py)
    "float": {"loss": 1e-5, "gradient": 1e-4, "running": 1e-4, "logits": 1e-4},
}


class ModelAgainstTorchvision(unittest.TestCase):
    def compare(self, depth, size, batch, classes, smoothing, precision):
        tolerance = TOLERANCE[precision]
        model = initial_model(depth, classes, seed=depth, batches_tracked=7)
        state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
        images = torch.randn(batch, 3, size, size, dtype=torch.float32)
        labels = torch.randint(0, classes, (batch,), dtype=torch.int64)

        with tempfile.TemporaryDirectory() as work:
            weights_path = os.path.join(work, "weights.safetensors")
            batch_path = os.path.join(work, "batch.safetensors")
            out_path = os.path.join(work, "out.safetensors")
            write_safetensors(weights_path, state)
            write_safetensors(batch_path, {"images": images.permute(0, 2, 3, 1).contiguous().numpy(),
                                           "labels": labels.numpy()})
            subprocess.run([MODEL_CHECK, str(depth), str(classes), precision, weights_path, batch_path, out_path,
                            repr(smoothing)], check=True, timeout=600)
            ours = read_safetensors(out_path)

        flips = []
        if precision == "float":  # float64 on train's decisions; each one float64 took otherwise must be a tie
            step = StepReference(model, [images.numpy()], [labels.numpy()], smoothing)
            reference, single, flips = step.on_decisions([decisions_of(ours)])
            allowed = float32_tolerance(reference, single, floor=tolerance["gradient"])
            for _, margin, what in flips:
                self.assertLess(margin, AMBIGUITY, f"resnet{depth}: train's float32 decided {what} the other way "
                                f"than float64 by {margin:.1f} RMS float32 errors: not rounding")
        model = model.double()
        model.train()
        logits = model(images.double())
        loss = F.cross_entropy(logits, labels, label_smoothing=smoothing)
        loss.backward()

        errors = {"loss": relative(ours["loss"][0], loss.item())}
        self.assertLess(errors["loss"], tolerance["loss"], f"resnet{depth} loss {ours['loss'][0]} vs {loss.item()}")
        worst = (0.0, "")
        parameters = dict(model.named_parameters())
        self.assertEqual(len(parameters), sum(1 for k in ours if k.startswith("grad.")))
        for name, parameter in parameters.items():
            exact = reference[name] if precision == "float" else parameter.grad.numpy()
            error = relative(ours["grad." + name], exact)
            worst = max(worst, (error, name))
            limit = allowed[name] if precision == "float" else tolerance["gradient"]
            self.assertLessEqual(error, limit, f"resnet{depth} {precision} gradient of {name}")
        for name, buffer in model.named_buffers():
            if name.endswith("num_batches_tracked"):
                self.assertEqual(int(ours["state." + name]), int(buffer), name)
            else:
                error = relative(ours["state." + name], buffer.numpy())
                self.assertLess(error, tolerance["running"], f"resnet{depth} {precision} {name}")
        model.eval()
        with torch.no_grad():
            reference_logits = model(images.double()).numpy()
        logit_error = relative(ours["eval_logits"], reference_logits)
        self.assertLess(logit_error, tolerance["logits"], f"resnet{depth} {precision} inference logits")
        print(f"\nresnet{depth} {precision} {size}x{size} batch {batch}: loss error {errors['loss']:.2e}, worst gradient "
              f"error {worst[0]:.2e} ({worst[1]}) over {len(parameters)} tensors"
              f"{f' (float64 on train decisions: {len(flips)} ambiguous taken the other way)' if flips else ''}, "
              f"inference logits error {logit_error:.2e}", flush=True)

    def test_resnet50_double(self):
        self.compare(depth=50, size=64, batch=4, classes=10, smoothing=0.1, precision="double")

    def test_resnet50_float(self):
        self.compare(depth=50, size=64, batch=4, classes=10, smoothing=0.1, precision="float")

    def test_resnet18_double(self):
        self.compare(depth=18, size=64, batch=6, classes=7, smoothing=0.0, precision="double")

    def test_resnet18_float(self):
        self.compare(depth=18, size=64, batch=6, classes=7, smoothing=0.0, precision="float")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if "--model-check" not in arguments:
        sys.exit("usage: test_model_vs_torch.py --model-check PATH")
    at = arguments.index("--model-check")
    MODEL_CHECK = arguments[at + 1]
    del arguments[at:at + 2]
    torch.set_num_threads(2)
    unittest.main(argv=[sys.argv[0]] + arguments, verbosity=2)
