#!/usr/bin/env python3
"""CPU training-step throughput of train against PyTorch on this machine: the same model, batch and image
size, one process using every core (OMP_NUM_THREADS / torch.set_num_threads). Prints images/s of each and
the ratio train / PyTorch. Needs Debian's python3-torch (run with /usr/bin/python3) and a built tree:
    /usr/bin/python3 scripts/bench/cpu_step_bench.py [--build build] [--steps 5] [--rounds 3] [--shapes 50x32x64,...]
On a machine shared with other work the figures are noisy: --rounds N measures each side N times,
alternating train and PyTorch so both see the same background load, and prints the best and the median
round of each (the ratio is of the best rounds; the median ratio is of the median rounds).
--clock cpu divides by the CPU time of the process (all its threads) instead of wall time: with
--threads 1 that is each side's own work, hardly touched by other processes on the machine.
"""
import argparse
import os
import re
import statistics
import subprocess
import time

import torch
import torchvision


def torch_images_per_second(depth, batch, size, steps, threads, clock):
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
    start = clock()
    for _ in range(steps):
        step()
    return batch * steps / (clock() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument("--shapes", default="50x32x64,50x8x224,18x32x64", help="DEPTHxBATCHxSIZE,...")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in shape.split("x")) for shape in args.shapes.split(",")]
    subprocess.run(["cmake", "--build", args.build, "--target", "step_bench"], check=True, stdout=subprocess.DEVNULL)
    binary = os.path.join(args.build, "scripts", "bench", "step_bench")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    unit = "img/s" if args.clock == "wall" else "img/CPU s"
    print(f"{args.threads} threads, {args.steps} steps, images per {'second' if args.clock == 'wall' else 'CPU second'}")
    if args.rounds == 1:
        print(f"{'model':<10}{'batch':>6}{'size':>6}{'train ' + unit:>18}{'PyTorch ' + unit:>18}{'ratio':>8}")
    else:
        print(f"{'model':<10}{'batch':>6}{'size':>6}{'train best/median':>26}"
              f"{'PyTorch best/median':>28}{'ratio best/median':>20}")
    for depth, batch, size in shapes:
        ours, theirs = [], []
        for _ in range(args.rounds):
            output = subprocess.run([binary, str(depth), str(batch), str(size), str(args.steps)], env=env,
                                    check=True, capture_output=True, text=True).stdout
            if args.clock == "wall":
                ours.append(float(re.search(r"([0-9.]+) images/s", output).group(1)))
            else:
                ours.append(batch / float(re.search(r"([0-9.]+) CPU s/step", output).group(1)))
            clock = time.perf_counter if args.clock == "wall" else time.process_time
            theirs.append(torch_images_per_second(depth, batch, size, args.steps, args.threads, clock))
        if args.rounds == 1:
            print(f"resnet{depth:<4}{batch:>6}{size:>6}{ours[0]:>18.2f}{theirs[0]:>18.2f}{ours[0] / theirs[0]:>8.2f}",
                  flush=True)
        else:
            best_ours, best_theirs = max(ours), max(theirs)
            median_ours, median_theirs = statistics.median(ours), statistics.median(theirs)
            print(f"resnet{depth:<4}{batch:>6}{size:>6}{best_ours:>16.2f} / {median_ours:<7.2f}"
                  f"{best_theirs:>18.2f} / {median_theirs:<7.2f}"
                  f"{best_ours / best_theirs:>12.2f} / {median_ours / median_theirs:<5.2f}", flush=True)

if __name__ == "__main__":
    main()
