#!/usr/bin/env python3
"""What the timeline costs, three ways:

1. CPU time (barely disturbed by other work on a shared machine): build/scripts/bench/timeline_bench runs the
   CPU engine's step in alternating blocks without and with the timeline's marks (one process, one thread)
   and prints the median CPU ms per step of each;
2. with --baseline-build DIR (a build of the code before the timeline, e.g. of its branch point): the model's
   step (build/scripts/bench/step_bench, CPU time) of both builds, alternated: the timeline's hooks when off;
3. wall clock of the whole job: the same 2-rank CPU job without a timeline and with one recording the measured
   steps (and, with --baseline, another build of train), alternating rounds; its step time is train's own
   (`timing step=... step_time max=...`, the slowest rank's) over the second half of the steps, which the
   timeline records; it also prints the size of the trace files. On a machine busy with other work these
   figures swing by a factor of two: read 1 and 2 for the cost, 3 for the file size.

    /usr/bin/python3 scripts/bench/timeline_bench.py [--build build] [--baseline-build DIR] [--baseline OTHER/train]
        [--rounds 3] [--steps 40] [--layers 18] [--image 32] [--batch 32]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMING = re.compile(r"timing step=(\d+) step_time max=([\d.]+)")


def run(train, base, data, args, timeline):
    hyperparameters = {"num_layers": str(args.layers), "image_shape": f"3,{args.image},{args.image}",
                       "mini_batch_size": str(args.batch), "processes_per_host": "2", "epochs": "1000",
                       "max_steps": str(args.steps), "learning_rate": "0.1", "checkpoint_frequency": "0"}
    first = args.steps // 2 + 1
    if timeline:
        hyperparameters["timeline_steps"] = f"{first}-{args.steps}"
    config = os.path.join(base, "input", "config")
    os.makedirs(config, exist_ok=True)
    os.makedirs(os.path.join(base, "input", "data"), exist_ok=True)
    if not os.path.lexists(os.path.join(base, "input", "data", "train")):
        os.symlink(os.path.join(data, "train"), os.path.join(base, "input", "data", "train"))
    with open(os.path.join(config, "hyperparameters.json"), "w") as f:
        json.dump(hyperparameters, f)
    with open(os.path.join(config, "inputdataconfig.json"), "w") as f:
        json.dump({"train": {"TrainingInputMode": "File"}}, f)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "SM_", "TRAIN_TIMELINE"))}
    env["SAGEMAKER_BASE_DIR"] = base
    result = subprocess.run([train], env=env, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        sys.exit(f"{train} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    # Intervals that end after the first measured step and start at or after it.
    intervals, previous = [], 0
    for match in TIMING.finditer(result.stdout):
        step, seconds = int(match.group(1)), float(match.group(2))
        if previous >= first - 1:
            intervals.append((step - previous, seconds))
        previous = step
    steps = sum(n for n, _ in intervals)
    per_step = sum(n * s for n, s in intervals) / steps
    sizes = {}
    folder = os.path.join(base, "output", "data", "timeline")
    if os.path.isdir(folder):
        sizes = {name: os.path.getsize(os.path.join(folder, name)) for name in sorted(os.listdir(folder))}
    return per_step, sizes


def cpu_time(args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    builds = [args.build] + ([args.baseline_build] if args.baseline_build else [])
    for build in builds:
        subprocess.run(["cmake", "--build", build, "--target", "step_bench"] +
                       (["timeline_bench"] if build == args.build else []), check=True, stdout=subprocess.DEVNULL)
    shape = ["50", "16", "64"]
    print("1. CPU time of the CPU engine's step, without and with the timeline's marks (one thread):", flush=True)
    subprocess.run([os.path.join(args.build, "scripts", "bench", "timeline_bench")] + shape + ["4", str(4 * args.rounds)],
                   env=env, check=True)
    if not args.baseline_build:
        return
    print("2. CPU time of the model's step, this build against the baseline build (one thread):", flush=True)
    cpu = {build: [] for build in builds}
    for _ in range(2 * args.rounds):
        for build in builds:
            out = subprocess.run([os.path.join(build, "scripts", "bench", "step_bench")] + shape + ["4"], env=env,
                                 check=True, capture_output=True, text=True).stdout
            cpu[build].append(float(re.search(r"([\d.]+) CPU s/step", out).group(1)))
    for build in builds:
        print(f"   {build}: median {statistics.median(cpu[build]) * 1e3:.1f} CPU ms per step, best "
              f"{min(cpu[build]) * 1e3:.1f} ({len(cpu[build])} runs)")
    ratio = statistics.median(cpu[args.build]) / statistics.median(cpu[args.baseline_build])
    print(f"   this build / baseline: {100 * (ratio - 1):+.2f}% (median)", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--baseline-build", help="a build directory of the code before the timeline")
    parser.add_argument("--baseline", help="another train binary for the whole-job comparison")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--layers", type=int, default=18)
    parser.add_argument("--image", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    args.train = os.path.join(args.build, "train")
    cpu_time(args)
    with tempfile.TemporaryDirectory(prefix="bench-timeline-") as work:
        data = os.path.join(work, "fashion")
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "make_fashion_mnist_folder.py"), "--limit",
                        "2000", data], check=True, capture_output=True)
        modes = [("off", args.train, False), ("on", args.train, True)]
        if args.baseline:
            modes.insert(0, ("baseline", args.baseline, False))
        times = {name: [] for name, _, _ in modes}
        sizes = {}
        for round_number in range(args.rounds):
            for name, train, timeline in modes:
                per_step, found = run(train, os.path.join(work, f"{name}-{round_number}"), data, args, timeline)
                times[name].append(per_step)
                sizes = found or sizes
                print(f"round {round_number + 1}: {name:8} {per_step * 1e3:8.2f} ms per step", flush=True)
    print(f"\n3. resnet{args.layers}, {args.image}x{args.image}, {args.batch} images per step on 2 CPU ranks; steps "
          f"{args.steps // 2 + 1}-{args.steps} of {args.steps} measured (and recorded, with the timeline on), "
          f"{args.rounds} rounds")
    print(f"{'':10}{'median ms':>12}{'best ms':>12}")
    for name in times:
        print(f"{name:10}{statistics.median(times[name]) * 1e3:12.2f}{min(times[name]) * 1e3:12.2f}")
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    print(f"timeline on vs off: {100 * (on / off - 1):+.2f}% (median), {100 * (min(times['on']) / min(times['off']) - 1):+.2f}% (best)")
    if args.baseline:
        base = statistics.median(times["baseline"])
        print(f"off vs baseline: {100 * (off / base - 1):+.2f}% (median), "
              f"{100 * (min(times['off']) / min(times['baseline']) - 1):+.2f}% (best)")
    for name, size in sizes.items():
        print(f"{name}: {size} bytes ({size / (args.steps - args.steps // 2):.0f} bytes per recorded step)")


if __name__ == "__main__":
    main()
