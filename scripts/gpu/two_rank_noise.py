#!/usr/bin/env python3
"""How far fp32 rounding alone moves gpu_training_check.py's two-rank jobs: the bars of its two-ranks check
(TWO_RANK_BARS) come from these figures.

    build-python/bin/python scripts/gpu/two_rank_noise.py --data FASHION/train [--seeds 0,1,2,3,4] [--per-class N]

torchvision's ResNet-18 (10 classes) trains the twelve-step job of the check as its two CPU ranks do: 28x28
Fashion-MNIST images, 2 ranks of 32 (batch norm over each rank's 32), the mean of the two ranks' gradients, SGD
with momentum 0.9 and weight decay 1e-4, the learning rate 0.05 scaled to the global batch of 64 (0.0125) with
cosine decay over 12 steps. From one initial model per seed it trains three times: in fp64, in fp32, and in fp32
with channels_last tensors (another valid order of the same sums, as a GPU's kernels are to the CPU's). It prints,
for fp32 against fp64 and for the two fp32 orders against each other, what the check compares: the first step's
averaged gradient (relative L2 over all parameters, and the worst tensor), the losses of steps 1, 2 and the mean
and largest of steps 3-12, and the parameters after twelve steps (over all, and the worst tensor); then the
largest of each over every seed. Seconds per seed on 2 cores: about 30.
"""
import argparse
import math
import os

import numpy as np
import torch
import torchvision
from PIL import Image

from gpu_training_check import TWO_RANKS  # the check's job: this script measures its noise

STEPS = 12  # the twelve-step job's (gpu_training_check.TWO_RANK_SUBSETS)
RANKS = int(TWO_RANKS["processes_per_host"])
PER_RANK = int(TWO_RANKS["mini_batch_size"]) // RANKS
PEAK_LR = float(TWO_RANKS["learning_rate"]) * int(TWO_RANKS["mini_batch_size"]) / 256  # train's scaling rule


def images(folder, per_class):
    classes = sorted(os.listdir(folder))
    files = [(os.path.join(folder, name, f), label) for label, name in enumerate(classes)
             for f in sorted(os.listdir(os.path.join(folder, name)))[:per_class]]
    np.random.RandomState(9).shuffle(files)
    files = files[:STEPS * RANKS * PER_RANK]
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    x = torch.stack([torch.from_numpy(np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255)
                     .permute(2, 0, 1) for path, _ in files])
    return ((x - mean) / std).double(), torch.tensor([label for _, label in files])


def train(x, y, initial, dtype, channels_last=False):
    model = torchvision.models.resnet18(num_classes=10)
    model.load_state_dict(initial)
    model = model.to(dtype)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=PEAK_LR, momentum=0.9, weight_decay=1e-4)
    losses, first_gradient = [], None
    for step in range(STEPS):
        for group in optimizer.param_groups:
            group["lr"] = PEAK_LR * 0.5 * (1 + math.cos(math.pi * step / STEPS))
        optimizer.zero_grad()
        loss_sum = 0.0
        for rank in range(RANKS):  # each rank's batch norm over its own images; the mean of their gradients
            start = (step * RANKS + rank) * PER_RANK
            batch = x[start:start + PER_RANK].to(dtype)
            if channels_last:
                batch = batch.contiguous(memory_format=torch.channels_last)
            loss = torch.nn.functional.cross_entropy(model(batch), y[start:start + PER_RANK]) / RANKS
            loss.backward()
            loss_sum += loss.item()
        optimizer.step()
        losses.append(loss_sum)
        if step == 0:
            first_gradient = {n: optimizer.state[p]["momentum_buffer"].double().clone()
                              for n, p in model.named_parameters()}
    parameters = {n: p.detach().double().clone() for n, p in model.named_parameters()}
    return losses, first_gradient, parameters


def difference(ours, theirs):
    together = math.sqrt(sum(((ours[n] - theirs[n]) ** 2).sum().item() for n in theirs) /
                         sum((theirs[n] ** 2).sum().item() for n in theirs))
    worst = max(((ours[n] - theirs[n]).norm().item() / (theirs[n].norm().item() or 1.0), n) for n in theirs)
    return together, worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a Fashion-MNIST image folder's train/ (class folders)")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--per-class", type=int, default=None,
                        help="draw the 768 images from the first N of each class (default: from all of them)")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    x, y = images(args.data, args.per_class)
    worst = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        torch.manual_seed(seed)
        initial = torchvision.models.resnet18(num_classes=10).double().state_dict()
        fp64, fp32 = train(x, y, initial, torch.float64), train(x, y, initial, torch.float32)
        other = train(x, y, initial, torch.float32, channels_last=True)
        for name, ours, theirs in (("fp32 vs fp64", fp32, fp64), ("fp32 orders", other, fp32)):
            gradient, gradient_tensor = difference(ours[1], theirs[1])
            parameters, parameters_tensor = difference(ours[2], theirs[2])
            loss = [abs(a - b) / b for a, b in zip(ours[0], theirs[0])]
            figures = {"gradient": gradient, "gradient_tensor": gradient_tensor[0], "loss_step_1": loss[0],
                       "loss_step_2": loss[1], "loss_later_mean": sum(loss[2:]) / len(loss[2:]),
                       "loss_later_max": max(loss[2:]), "parameters": parameters,
                       "parameters_tensor": parameters_tensor[0]}
            for key, value in figures.items():
                worst[key] = max(worst.get(key, 0.0), value)
            print(f"seed {seed}, {name}: first step's gradient {gradient:.1e} (worst tensor {gradient_tensor[0]:.1e}, "
                  f"{gradient_tensor[1]}); loss step 1 {loss[0]:.1e}, step 2 {loss[1]:.1e}, steps 3-12 mean "
                  f"{figures['loss_later_mean']:.1e} max {figures['loss_later_max']:.1e}; parameters after "
                  f"{STEPS} steps {parameters:.1e} (worst tensor {parameters_tensor[0]:.1e}, {parameters_tensor[1]})",
                  flush=True)
    print("largest over seeds: " + ", ".join(f"{key} {value:.1e}" for key, value in worst.items()))


if __name__ == "__main__":
    main()
