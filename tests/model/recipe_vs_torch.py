#!/usr/bin/env python3
"""The README's five-minute run, trained by `train` and by torchvision with the same recipe, over several seeds.

A training run's top-1 depends on every rounding along the way (a ReLU decided the other way in one step
sends the run elsewhere), so one run on one machine says little; the question is whether train's runs and
PyTorch's runs of the same recipe land in the same place. Both train ResNet-18 on the same image folder
(Fashion-MNIST, scripts/data/make_fashion_mnist_folder.py) with the README's hyperparameters:
  2 ranks x 32 images (batch norm per rank, the gradient averaged), DistributedSampler shards of a seeded
  shuffle, 2 epochs, peak learning rate 0.2 x 64 / 256 reached by linear warm-up over 0.3 epochs then cosine,
  SGD momentum 0.9, weight decay 1e-4 on convolution and classifier weights, no augmentation, fp32;
  validation top-1 over the validation folder, each rank its share with its own running statistics.
PyTorch's shuffle and initialisation draw other random numbers than train's: the runs are alike in law, not
in value.

    tests/model/recipe_vs_torch.py --data /tmp/fashion [--train build/train] [--seeds 5] [--work DIR]

Prints each run's top-1 and each side's mean and range.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
RECIPE = {"num_layers": "18", "image_shape": "3,28,28", "mini_batch_size": "64", "processes_per_host": "2",
          "epochs": "2", "learning_rate": "0.2", "warmup_epochs": "0.3", "augmentation_type": "none"}


def load_folder(folder):
    from PIL import Image
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    images, labels = [], []
    for label, name in enumerate(classes):
        for file in sorted(os.listdir(os.path.join(folder, name))):
            pixels = np.asarray(Image.open(os.path.join(folder, name, file)).convert("RGB"), dtype=np.float32)
            images.append(((pixels / 255.0 - MEAN) / STD).transpose(2, 0, 1))
            labels.append(label)
    return np.stack(images).astype(np.float32), np.array(labels)


def shard(order, ranks, rank):
    total = -(-len(order) // ranks) * ranks
    padded = list(order) + list(order[:total - len(order)])
    return padded[rank::ranks]


def torch_run(train, validation, seed, ranks=2, per_rank=32, epochs=2, learning_rate=0.2, warmup_epochs=0.3):
    import torch
    import torch.nn.functional as F
    import torchvision
    torch.manual_seed(seed)
    torch.set_num_threads(2)
    replicas = [torchvision.models.resnet18(num_classes=int(train[1].max()) + 1) for _ in range(ranks)]
    for replica in replicas[1:]:
        replica.load_state_dict(replicas[0].state_dict())
    decays = [p for n, p in replicas[0].named_parameters() if p.dim() > 1]
    others = [p for n, p in replicas[0].named_parameters() if p.dim() <= 1]
    optimizer = torch.optim.SGD([{"params": decays, "weight_decay": 1e-4}, {"params": others, "weight_decay": 0}],
                                lr=0.0, momentum=0.9)
    images, labels = torch.from_numpy(train[0]), torch.from_numpy(train[1])
    steps_per_epoch = math.ceil(math.ceil(len(labels) / ranks) / per_rank)
    warmup = round(warmup_epochs * steps_per_epoch)
    total = steps_per_epoch * epochs
    peak = learning_rate * per_rank * ranks / 256
    step = 0
    for epoch in range(epochs):
        order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed * 1000 + epoch)).tolist()
        shards = [shard(order, ranks, r) for r in range(ranks)]
        for s in range(steps_per_epoch):
            if step < warmup:
                lr = peak * (step + 1) / warmup
            else:
                lr = peak * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))
            for group in optimizer.param_groups:
                group["lr"] = lr
            sums = None
            for r, replica in enumerate(replicas):
                replica.train()
                batch = shards[r][s * per_rank:(s + 1) * per_rank]
                if len(batch) == 1:
                    batch = batch + shards[r][:1]
                replica.zero_grad()
                F.cross_entropy(replica(images[batch]), labels[batch]).backward()
                grads = [p.grad / ranks for p in replica.parameters()]
                sums = grads if sums is None else [a + b for a, b in zip(sums, grads)]
            for p, g in zip(replicas[0].parameters(), sums):
                p.grad = g
            optimizer.step()
            with torch.no_grad():
                for replica in replicas[1:]:
                    for p, q in zip(replica.parameters(), replicas[0].parameters()):
                        p.copy_(q)
            step += 1
    correct = 0
    v_images, v_labels = torch.from_numpy(validation[0]), torch.from_numpy(validation[1])
    with torch.no_grad():
        for r, replica in enumerate(replicas):
            replica.eval()
            mine = list(range(r, len(v_labels), ranks))
            for i in range(0, len(mine), 256):
                batch = mine[i:i + 256]
                correct += int((replica(v_images[batch]).argmax(1) == v_labels[batch]).sum())
    return correct / len(v_labels)


def train_run(train_binary, data, seed, work):
    base = os.path.join(work, f"train-seed{seed}")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(os.path.join(base, "input", "config"))
    os.makedirs(os.path.join(base, "input", "data"))
    for channel in ("train", "validation"):
        os.symlink(os.path.join(data, channel), os.path.join(base, "input", "data", channel))
    with open(os.path.join(base, "input", "config", "hyperparameters.json"), "w") as f:
        json.dump(dict(RECIPE, seed=str(seed)), f)
    with open(os.path.join(base, "input", "config", "inputdataconfig.json"), "w") as f:
        json.dump({"train": {"TrainingInputMode": "File"}, "validation": {"TrainingInputMode": "File"}}, f)
    result = subprocess.run([train_binary], env=dict(os.environ, SAGEMAKER_BASE_DIR=base), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=1800)
    found = re.findall(r"validation_top1=([0-9.]+)", result.stdout)
    if result.returncode != 0 or not found:
        sys.exit(f"train exit {result.returncode} for seed {seed}: " + " / ".join(result.stdout.splitlines()[-5:]))
    return float(found[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a folder with train/ and validation/ image folders")
    parser.add_argument("--train", default=None, help="train's binary (omit to run PyTorch only)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="recipe-")
    data = os.path.abspath(args.data)
    train_set, validation_set = load_folder(os.path.join(data, "train")), load_folder(os.path.join(data, "validation"))
    results = {"train": [], "torchvision": []}
    for seed in range(args.seeds):
        if args.train:
            started = time.monotonic()
            results["train"].append(train_run(os.path.abspath(args.train), data, seed, work))
            print(f"seed {seed}: train top-1 {results['train'][-1]:.4f} ({time.monotonic() - started:.0f} s)", flush=True)
        started = time.monotonic()
        results["torchvision"].append(torch_run(train_set, validation_set, seed))
        print(f"seed {seed}: torchvision top-1 {results['torchvision'][-1]:.4f} ({time.monotonic() - started:.0f} s)",
              flush=True)
    for side, values in results.items():
        if values:
            print(f"{side}: mean {np.mean(values):.4f}, range {min(values):.4f}-{max(values):.4f} over {len(values)} seeds")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
