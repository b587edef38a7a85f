#!/usr/bin/env python3
"""CPU training-step throughput of train against PyTorch on this machine: the same model, batch and image
size, one process using every core (OMP_NUM_THREADS / torch.set_num_threads). Prints images/s of each and
the ratio train / PyTorch. Needs Debian's python3-torch (run with /usr/bin/python3) and a built tree:
    /usr/bin/python3 scripts/bench_cpu_step.py [--build build] [--steps 5]
"""
import argparse
import os
import re
import subprocess
import time

import torch
import torchvision


def torch_images_per_second(depth, batch, size, steps, threads):
    torch.set_num_threads(threads)
    model = getattr(torchvision.models, f"resnet{depth}")(num_classes=1000)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    images = torch.randn(batch, 3, size, size)
    labels = torch.randint(0, 1000, (batch,))
    loss_function = torch.nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_function(model(images), labels).backward()
        optimizer.step()

    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return batch * steps / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    subprocess.run(["cmake", "--build", args.build, "--target", "step_bench"], check=True, stdout=subprocess.DEVNULL)
    binary = os.path.join(args.build, "scripts", "bench", "step_bench")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    print(f"{'model':<10}{'batch':>6}{'size':>6}{'train img/s':>14}{'PyTorch img/s':>15}{'ratio':>8}")
    for depth, batch, size in [(50, 32, 64), (50, 8, 224), (18, 32, 64)]:
        output = subprocess.run([binary, str(depth), str(batch), str(size), str(args.steps)], env=env, check=True,
                                capture_output=True, text=True).stdout
        ours = float(re.search(r"([0-9.]+) images/s", output).group(1))
        theirs = torch_images_per_second(depth, batch, size, args.steps, args.threads)
        print(f"resnet{depth:<4}{batch:>6}{size:>6}{ours:>14.2f}{theirs:>15.2f}{ours / theirs:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
