#!/usr/bin/env python3
"""`train` itself on a GPU: real jobs with device=cuda against the CPU's results carried in the bundle, stop and
resume on the GPU, the GPU's model file in torchvision, the fast path byte for byte, two ranks on one GPU, the
timeline. Run by scripts/gpu/gpu_check.sh on a machine with a GPU, one check per process (they run side by side).

The CPU's side is computed where the bundle is made (scripts/gpu/make_gpu_bundle.sh), so that a GPU loan is spent
on the GPU:

    python3 scripts/gpu/gpu_training_check.py --make-references OUT --data FASHION [--train CMD] [--epochs 2]

runs the CPU jobs (device=cpu) and writes OUT/references.json: the jobs' hyperparameters, a digest of the data
folder, the accuracy job's validation top-1 for each of its seeds (ACCURACY_SEEDS, one after another) and their
mean, and the two-rank jobs' sample logs, losses, checkpoint states and a
digest of every checkpoint tensor (its norm, 32 signed sums over all of its elements and 256 of its values: a
ResNet-18 tensor set is 45 MB, its digest under 1 MB). Then, on the GPU machine:

    python3 scripts/gpu/gpu_training_check.py --data FASHION [--references DIR] [--train CMD] [--infer CMD]
                                          [--work DIR] [--checks LIST] [--device cuda|cpu] [--after-accuracy]

FASHION is a Fashion-MNIST image folder (train/ and validation/, as scripts/data/make_fashion_mnist_folder.py
writes it). --train runs `train` (default build/train; on a bundle machine "bash .gpu-bundle/run.sh train");
--infer runs tests/gpu/gpu_infer likewise. --checks picks from:
  accuracy    the references' accuracy job (ResNet-18 at 28x28, 1 rank, batch 128, 2 epochs) with device=cuda
              (bf16), once for each of the references' seeds, side by side on the one GPU: the mean validation
              top-1 within 2 points of the CPU runs' mean (references). One seed's top-1 moves by more than a
              point with the seed alone, so one run against one would fail a correct GPU by chance;
  resume      the same GPU job (the first seed's) stopped by SIGTERM at step 40 and restarted: model.safetensors
              bytes equal to the uninterrupted GPU run's (the accuracy check's first seed: with --after-accuracy,
              the one another process of this script is running in the same --work, waited for; else run here
              first);
  torchvision the uninterrupted GPU run's model.safetensors loads strictly into torchvision's resnet18
              (num_classes=10), whose logits (fp32) on 64 random images match train's own GPU inference (bf16)
              to bf16 tolerance (the same uninterrupted run as resume's);
  fast        a GPU job of --fast-steps steps with TRAIN_SHARED_GRADIENT_BUFFERS=1 and without, side by side:
              model.safetensors byte for byte equal (shared gradient buffers change where values live, not one
              of them);
  two-ranks   two ranks on one GPU (TRAIN_RANKS_SHARE_GPUS=1: each rank its own NCCL host id, NCCL's socket
              transport), fp32, against the two CPU ranks of the references on the same data and
              hyperparameters: the same samples on each rank, the averaged gradient of the first step (the
              momentum buffer of a one-step job's checkpoint), a twelve-step job's losses, checkpoint (state and
              parameters) and per-rank timing lines, each within the job's own fp32 noise (TWO_RANK_BARS, measured
              by scripts/gpu/two_rank_noise.py). When NCCL refuses, it says what NCCL said;
  timeline-1, timeline-2
              timeline_steps=11-20 with 1 rank, and with 2 ranks on the one GPU: valid trace JSON
              (tests/support/chrome_trace.py), each rank has the GPU's tracks (compute stream steps, waits for
              input, forward/backward by layer group, the copy stream's uploads, each bucket on the communication
              stream), the first bucket starts before backward ends, and the summary adds up to the compute
              stream's step time within 5%;
  across      (in no group of gpu_check.sh: it trains on the CPU of the GPU machine) a checkpoint of the stopped
              GPU job resumes with device=cpu, and one of a CPU job stopped the same way with device=cuda.
accuracy and two-ranks need --references. Prints one line per check, "CHECK|name|PASS or FAIL|detail", and exits 1
when any failed.

--device cpu runs the same checks with the CPU standing in for the GPU (--infer "build/tests/model/model_check
infer", a small --data, references made from it): ctest's test of this script on a machine without one, so
that a GPU loan is not spent on this script's own mistakes.
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from stop_at_step import stop_at_step  # noqa: E402
from chrome_trace import read_trace, step_shares  # noqa: E402

REFERENCES_FORMAT = 2
# The accuracy job (and resume's, torchvision's, across's): 12,000 training images at batch 128 are 94 steps an
# epoch, a few seconds of GPU time; the CPU run that makes its reference takes minutes where the bundle is made.
# The accuracy check compares the mean top-1 of JOB over these seeds on each side; the first is JOB's own, whose GPU
# run is the uninterrupted one that resume and torchvision compare with. Why this learning rate and this many
# seeds: JOB's validation top-1 on the CPU, seed by seed (2026-11-27, the bundle's 12,000 images, 2 epochs):
#   learning_rate 0.2 (the job before): seeds 1-10 from 0.7737 to 0.8410, standard deviation 2.0 points. A loss
#     spike near the peak rate sets some runs back several points, so one seed against one fails a correct GPU
#     about half the time, and even 16 seeds a side would fail it ~0.5% of the time (normal: 2 / (2.0 sqrt(2/16))
#     = 2.8 sd), more with that heavy tail.
#   learning_rate 0.1: seeds 1-12 from 0.8511 to 0.8591, standard deviation 0.29 points (95% upper bound 0.46).
# With 3 seeds a side, the difference of the means of a correct GPU (the same spread) has a standard deviation of
# 0.29 sqrt(2/3) = 0.24 points: 2 points is 8.3 of them (P ~ 1e-16); at the upper bound 5.4 (P ~ 1e-7); with a
# GPU spread three times the CPU's, 3.7 (P ~ 2e-4). One seed a side would be 4.8 at the measured spread but 2.2
# (P ~ 3%) at three times it: the two more are margin for the GPU's unmeasured spread, a few seconds of GPU time
# side by side and minutes of CPU time where the bundle is made.
ACCURACY_SEEDS = ("5", "6", "7")
JOB = {"num_layers": "18", "image_shape": "3,28,28", "mini_batch_size": "128", "processes_per_host": "1",
       "epochs": "2", "learning_rate": "0.1", "warmup_epochs": "0.5", "augmentation_type": "none",
       "seed": ACCURACY_SEEDS[0], "checkpoint_frequency": "1"}
STOP_AT = 40
TWO_RANKS = {"num_layers": "18", "image_shape": "3,28,28", "mini_batch_size": "64", "processes_per_host": "2",
             "epochs": "1", "learning_rate": "0.05", "augmentation_type": "none", "seed": "9",
             "precision_dtype": "float32", "checkpoint_frequency": "1"}
# Training images per class of the two-rank jobs: 60 images are one step of 64; 760 are twelve.
TWO_RANK_SUBSETS = {"one-step": 6, "twelve-steps": 76}
# How far fp32 rounding alone moves the two-rank jobs, measured (scripts/gpu/two_rank_noise.py: torchvision's
# ResNet-18 on these jobs' kind of data and hyperparameters, fp32 against fp64 and against another valid fp32 order,
# seeds 0-4, with --per-class 77 and with the default draw; 2026-11-27): the first step's averaged gradient by up
# to 4.5e-3 (relative L2 over all parameters) and 9.7e-3 in one tensor (most seeds 1e-5: the outliers are seeds
# whose gradient cancels badly); step 1's loss by 2.5e-7 and step 2's by 2.0e-4; from step 3 on this job amplifies
# rounding (at 28x28 layer4 is 1x1, its batch norm over 32 values): the losses of steps 3-12 by 6.7e-2 on average
# and 0.22 at one step, the parameters after 12 steps by 1.4e-2 in all and by 0.9 in one batch-norm bias (zero at
# the start).
# The bars leave room above that (x4 to x10) and stay far below what a wrong reduction does (a sum for a mean, a
# bucket left out or stale: 0.5 and more). Tighter bars failed a correct GPU (an H200, 2026-11-27).
TWO_RANK_BARS = {"gradient": 2e-2, "gradient_tensor": 5e-2, "loss_steps_1_2": 2e-3, "loss_later_mean": 0.2,
                 "parameters": 5e-2}
JOB_TIMEOUT = 900  # seconds for any one train job here (gpu_check.sh stops a check at its own budget before)


def report(name, passed, detail):
    print(f"CHECK|{name}|{'PASS' if passed else 'FAIL'}|{detail}", flush=True)
    return passed


# ---- jobs ---------------------------------------------------------------------------------------------------

def make_job(base, data, hyperparameters):
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(os.path.join(base, "input", "config"))
    os.makedirs(os.path.join(base, "input", "data"))
    with open(os.path.join(base, "input", "config", "hyperparameters.json"), "w") as f:
        json.dump(hyperparameters, f)
    with open(os.path.join(base, "input", "config", "inputdataconfig.json"), "w") as f:
        json.dump({"train": {"TrainingInputMode": "File"}, "validation": {"TrainingInputMode": "File"}}, f)
    for channel in ("train", "validation"):
        os.symlink(os.path.join(data, channel), os.path.join(base, "input", "data", channel))


def start_train(command, base, env=None):
    env = dict(os.environ, SAGEMAKER_BASE_DIR=base, **(env or {}))
    return subprocess.Popen(shlex.split(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_train(command, base, log, timeout=JOB_TIMEOUT, env=None):
    process = start_train(command, base, env)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        output += f"\n(killed after {timeout} s)"
    with open(log, "w") as f:
        f.write(output)
    return process.returncode, output


def side_by_side(*calls):
    """Runs each (function, args...) in a thread of its own; their results in order (jobs that do not time each
    other share the machine)."""
    results = [None] * len(calls)
    errors = []

    def run(index, function, arguments):
        try:
            results[index] = function(*arguments)
        except BaseException as error:  # noqa: BLE001 - raised again below, in the caller's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, call[0], call[1:])) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def last_top1(output):
    found = re.findall(r"validation_top1=([0-9.]+)", output)
    return float(found[-1]) if found else None


def steps_of(output):
    """The steps a job trained (its "model written ... after N steps" line), or None."""
    found = re.findall(r"model written to .* after (\d+) steps", output)
    return int(found[-1]) if found else None


def losses_of(output):
    return dict(re.findall(r"step=(\d+) epoch=\d+ loss=([0-9.]+)", output))


def model_bytes(base):
    path = os.path.join(base, "model", "model.safetensors")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return f.read()


def tail(output, lines):
    return " / ".join(output.splitlines()[-lines:])


# ---- what the CPU's side carries: a digest of the data and of each tensor --------------------------------------

def folder_digest(folder):
    """sha256 over every file's relative path and bytes (the same images on both machines)."""
    digest = hashlib.sha256()
    for directory, subdirectories, files in os.walk(folder, followlinks=True):
        subdirectories.sort()
        for name in sorted(files):
            path = os.path.join(directory, name)
            digest.update(os.path.relpath(path, folder).encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


PROJECTIONS, SAMPLED, BLOCK = 32, 256, 4096


def _signs(count, salt):
    """(count, PROJECTIONS) of +-1, a fixed function of the position (the same on any machine and numpy)."""
    import numpy as np
    index = np.arange(count, dtype=np.uint64)[:, None] * np.uint64(PROJECTIONS) + np.arange(
        PROJECTIONS, dtype=np.uint64)[None, :]
    h = index * np.uint64(0x9E3779B97F4A7C15) + np.uint64(salt)
    h ^= h >> np.uint64(31)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(29)
    return np.where((h >> np.uint64(63)) == 1, -1.0, 1.0)


def tensor_digest(array):
    """What a tensor's comparison needs, in under 3 KB: its L2 norm; PROJECTIONS sums of all its elements with
    pseudo-random signs (the signs of element i are a(i mod BLOCK) b(i div BLOCK), so that the mean square of
    the difference of two tensors' sums is the square of the L2 norm of their difference); SAMPLED of its values,
    evenly spaced."""
    import numpy as np
    flat = np.asarray(array, dtype=np.float64).reshape(-1)
    blocks = -(-flat.size // BLOCK)
    padded = np.zeros(blocks * BLOCK)
    padded[:flat.size] = flat
    sums = ((padded.reshape(blocks, BLOCK) @ _signs(BLOCK, 1)) * _signs(blocks, 2)).sum(axis=0)
    where = np.unique(np.linspace(0, flat.size - 1, min(flat.size, SAMPLED)).astype(np.int64))
    return {"size": int(flat.size), "norm": float(np.linalg.norm(flat)), "sums": [float(v) for v in sums],
            "values": [float(v) for v in flat[where]]}


def digest_difference(reference, array):
    """The relative L2 difference of `array` from the tensor `reference` digests: the larger of the estimate
    from the signed sums (all elements) and the exact one over the sampled values."""
    import numpy as np
    ours = tensor_digest(array)
    if ours["size"] != reference["size"]:
        return float("inf")
    norm = reference["norm"] or 1.0
    estimate = float(np.sqrt(np.mean((np.array(ours["sums"]) - np.array(reference["sums"])) ** 2))) / norm
    sampled = np.array(reference["values"])
    sampled_norm = float(np.linalg.norm(sampled)) or 1.0
    exact = float(np.linalg.norm(np.array(ours["values"]) - sampled)) / sampled_norm
    return max(estimate, exact)


def checkpoint_of(base):
    """(state metadata, tensors) of a job's newest checkpoint, or (None, None)."""
    from safetensors_numpy import read_safetensors
    path = os.path.join(base, "checkpoints", "checkpoint.safetensors")
    if not os.path.exists(path):
        return None, None
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        metadata = json.loads(f.read(length)).get("__metadata__", {})
    return json.loads(metadata.get("state", "{}")), read_safetensors(path)


def digests_difference(references, tensors, names):
    """The relative L2 difference over several tensors together (their concatenation), from each one's digest
    difference; and the worst single tensor's, with its name."""
    distance = norm = 0.0
    worst = (0.0, "")
    for n in names:
        if n not in tensors:
            return float("inf"), (float("inf"), n)
        relative = digest_difference(references[n], tensors[n])
        distance += (relative * references[n]["norm"]) ** 2
        norm += references[n]["norm"] ** 2
        worst = max(worst, (relative, n))
    return math.sqrt(distance / norm) if norm else 0.0, worst


def weight_names(tensors):
    return sorted(n for n in tensors if not n.startswith("optimizer.") and tensors[n].dtype.kind == "f")


def momentum_names(tensors):
    return sorted(n for n in tensors if n.startswith("optimizer.momentum."))


# ---- the two-rank jobs (both sides) -------------------------------------------------------------------------

def subset(data, folder, per_class):
    """An image folder with the first `per_class` training images of each class (links to `data`'s)."""
    shutil.rmtree(folder, ignore_errors=True)
    for split, count in (("train", per_class), ("validation", 2)):
        for label in sorted(os.listdir(os.path.join(data, split))):
            os.makedirs(os.path.join(folder, split, label))
            for name in sorted(os.listdir(os.path.join(data, split, label)))[:count]:
                os.symlink(os.path.join(data, split, label, name), os.path.join(folder, split, label, name))
    return folder


def run_two_ranks(train, job, data, work, name, device):
    """A two-rank job on `device` (two ranks on one GPU for cuda); (exit, output, base, {rank: sample log})."""
    folder = subset(data, os.path.join(work, f"two-ranks-data-{name}-{device}"), TWO_RANK_SUBSETS[name])
    base = os.path.join(work, f"two-ranks-{name}-{device}")
    make_job(base, folder, dict(job, device=device))
    samples = os.path.join(work, f"two-ranks-{name}-{device}-samples")
    shutil.rmtree(samples, ignore_errors=True)
    os.makedirs(samples)
    env = {"TRAIN_SAMPLE_LOG": samples}
    if device == "cuda":
        env["TRAIN_RANKS_SHARE_GPUS"] = "1"
    code, output = run_train(train, base, os.path.join(work, f"two-ranks-{name}-{device}.log"), env=env)
    logs = {}
    for rank in (0, 1):
        path = os.path.join(samples, f"rank-{rank}.txt")
        logs[str(rank)] = open(path).read() if os.path.exists(path) else None
    return code, output, base, logs


# ---- the accuracy job over its seeds (both sides) -----------------------------------------------------------

def uninterrupted_base(work, device):
    """Where the accuracy job's first seed runs: the uninterrupted run resume, torchvision and across use."""
    return os.path.join(work, f"uninterrupted-{device}")


def run_seeds(train, job, seeds, data, work, device, together, timeout=JOB_TIMEOUT, first_ended=None):
    """The accuracy job once for each seed on `device`: side by side (together: the GPU's jobs, each a few seconds
    of GPU time) or one after another (the CPU's, each using every core). first_ended() is called the moment the
    first seed's job ends, whatever its end (resume and torchvision wait for that one). {seed: (exit, output,
    seconds)}."""
    def run(seed):
        base = uninterrupted_base(work, device) if seed == seeds[0] else os.path.join(work, f"accuracy-{device}-{seed}")
        make_job(base, data, dict(job, device=device, seed=seed))
        started = time.monotonic()
        try:
            code, output = run_train(train, base, base + ".log", timeout=timeout)
        finally:
            if seed == seeds[0] and first_ended:
                first_ended()
        return code, output, time.monotonic() - started

    if together:
        return dict(zip(seeds, side_by_side(*[(run, seed) for seed in seeds])))
    return {seed: run(seed) for seed in seeds}


def spread(values):
    """The sample standard deviation of the seeds' top-1 (0 for one seed)."""
    values = list(values)
    return statistics.stdev(values) if len(values) > 1 else 0.0


# ---- the references, where the bundle is made -----------------------------------------------------------------

def make_references(args, data, work):
    """The CPU's side of the accuracy and two-rank checks, into args.make_references/references.json."""
    started = time.monotonic()
    job = dict(JOB, epochs=str(args.epochs))
    seeds, one, twelve = side_by_side(
        (run_seeds, args.train, job, ACCURACY_SEEDS, data, work, "cpu", False, 3600),
        (run_two_ranks, args.train, TWO_RANKS, data, work, "one-step", "cpu"),
        (run_two_ranks, args.train, TWO_RANKS, data, work, "twelve-steps", "cpu"))
    failed = [(f"accuracy (seed {seed})", code, output) for seed, (code, output, _) in seeds.items()
              if code != 0 or last_top1(output) is None]
    failed += [(what, run[0], run[1]) for what, run in (("one-step", one), ("twelve-steps", twelve)) if run[0] != 0]
    if failed:
        for what, exit_code, text in failed:
            print(f"make references: the CPU's {what} job exited {exit_code}: {tail(text, 8)}", file=sys.stderr)
        return 1
    top1 = {seed: last_top1(output) for seed, (_, output, _) in seeds.items()}
    one_state, one_tensors = checkpoint_of(one[2])
    twelve_state, twelve_tensors = checkpoint_of(twelve[2])
    if one_tensors is None or twelve_tensors is None:
        print("make references: a two-rank CPU job left no checkpoint", file=sys.stderr)
        return 1
    references = {
        "format": REFERENCES_FORMAT,
        "made": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "commit": git_commit(),
        "train": {"command": args.train, "version": version_of(args.train), "sha256": file_sha256(args.train)},
        "data": {"sha256": folder_digest(data),
                 "images": {split: sum(len(files) for _, _, files in os.walk(os.path.join(data, split)))
                            for split in ("train", "validation")}},
        "accuracy": {"job": job, "seeds": list(ACCURACY_SEEDS), "top1": top1,
                     "mean": round(statistics.fmean(top1.values()), 6), "spread": round(spread(top1.values()), 6),
                     "steps": {seed: steps_of(output) for seed, (_, output, _) in seeds.items()},
                     "seconds": {seed: round(took) for seed, (_, _, took) in seeds.items()}},
        "two_ranks": {
            "job": TWO_RANKS, "subsets": TWO_RANK_SUBSETS,
            "one-step": {"samples": one[3], "state": one_state,
                         "momentum": {n: tensor_digest(one_tensors[n]) for n in momentum_names(one_tensors)}},
            "twelve-steps": {"samples": twelve[3], "losses": losses_of(twelve[1]), "state": twelve_state,
                             "tensors": sorted(twelve_tensors),
                             "weights": {n: tensor_digest(twelve_tensors[n]) for n in weight_names(twelve_tensors)}},
        },
    }
    os.makedirs(args.make_references, exist_ok=True)
    path = os.path.join(args.make_references, "references.json")
    with open(path + ".tmp", "w") as f:
        json.dump(references, f)
    os.replace(path + ".tmp", path)
    accuracy = references["accuracy"]
    print(f"make references: {path} ({os.path.getsize(path) // 1024} KiB): CPU top-1 mean {accuracy['mean']:.4f} "
          f"(spread {accuracy['spread']:.4f}) over seeds {top1_list(top1)}, "
          f"{accuracy['steps'][ACCURACY_SEEDS[0]]} steps each, {sum(accuracy['seconds'].values())} s; two-rank "
          f"jobs of 1 and 12 steps ({time.monotonic() - started:.0f} s in all)")
    return 0


def references_key():
    """What the references depend on besides train and the data: their format, the jobs and the digest. A change
    to any makes make_gpu_bundle.sh compute them again (a change to how they are compared does not)."""
    import inspect
    parts = [REFERENCES_FORMAT, JOB, ACCURACY_SEEDS, TWO_RANKS, TWO_RANK_SUBSETS, PROJECTIONS, SAMPLED, BLOCK] + [
        inspect.getsource(function) for function in (tensor_digest, _signs, make_references, run_seeds, run_two_ranks,
                                                     subset)]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def git_commit():
    result = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    return result.stdout.strip() or None


def file_sha256(command):
    """The sha256 of the program a one-word command names (the build's train), else None."""
    words = shlex.split(command)
    if len(words) != 1 or not os.path.isfile(words[0]):
        return None
    with open(words[0], "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def version_of(train):
    result = subprocess.run(shlex.split(train) + ["--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=60)
    return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else None


def load_references(args, data):
    """The references, or (None, why not) when they are missing or were made from other data."""
    if not args.references:
        return None, "no --references (make them with --make-references where the bundle is made)"
    path = os.path.join(args.references, "references.json")
    try:
        with open(path) as f:
            references = json.load(f)
    except (OSError, ValueError) as error:
        return None, f"cannot read {path}: {error}"
    if references.get("format") != REFERENCES_FORMAT:
        return None, (f"{path} is format {references.get('format')}, this script reads {REFERENCES_FORMAT}: "
                      "remake the bundle (scripts/gpu/make_gpu_bundle.sh)")
    if references["data"]["sha256"] != folder_digest(data):
        return None, (f"{path} was made from other data than {data}: remake the bundle, or pass the bundle's "
                      "own fashion.tgz")
    return references, None


# ---- the checks -----------------------------------------------------------------------------------------------

def accuracy_job(references):
    return dict(references["accuracy"]["job"]) if references else dict(JOB)


def check_accuracy(args, data, work, references):
    carried = references["accuracy"]
    seeds = tuple(carried["seeds"])
    name = (f"train device={args.device} vs device=cpu, Fashion-MNIST validation top-1, mean of {len(seeds)} seeds "
            "(within 2 points)")
    finished = uninterrupted_base(work, args.device) + ".finished"
    if os.path.exists(finished):  # an earlier run's, in a --work used again
        os.remove(finished)

    def first_ended():  # for resume and torchvision in other processes
        with open(finished, "w") as f:
            f.write("done\n")

    started = time.monotonic()
    runs = run_seeds(args.train, accuracy_job(references), seeds, data, work, args.device, True,
                     first_ended=first_ended)
    seconds = time.monotonic() - started
    ours = {seed: last_top1(output) for seed, (_, output, _) in runs.items()}
    device_lines = {seed: next((line for line in output.splitlines() if "device " in line and "rank 0 of" in line), "")
                    for seed, (_, output, _) in runs.items()}
    failed = [seed for seed, (code, _, _) in runs.items() if code != 0 or ours[seed] is None]
    wrong_device = [seed for seed, line in device_lines.items() if f"device {args.device}" not in line]
    cpu = statistics.fmean(carried["top1"][seed] for seed in seeds)  # "mean" is the same, for the bundle's summary
    if failed:
        gpu_side = f"GPU seeds {top1_list(ours)}"
    else:
        gpu = statistics.fmean(ours.values())
        gpu_side = (f"GPU mean {gpu:.4f} (seeds {top1_list(ours)}; spread {spread(ours.values()):.4f}), "
                    f"{(gpu - cpu) * 100:+.2f} points from the")
    detail = (f"{gpu_side} CPU mean {cpu:.4f} (seeds {top1_list(carried['top1'])}; spread {carried['spread']:.4f}); "
              f"{len(seeds)} jobs side by side in {seconds:.0f} s, {carried['job']['epochs']} epochs of "
              f"{references['data']['images']['train']} images each, references made {references['made']}; "
              f"{device_lines[seeds[0]].split('] ')[-1]}")
    for seed in failed:
        code, output, _ = runs[seed]
        detail += f" | seed {seed}: exit {code}, top-1 {ours[seed]}, log tail: " + tail(output, 4)
    if wrong_device:
        detail += f" | seeds {', '.join(wrong_device)}: no 'device {args.device}' line"
    return report(name, not failed and not wrong_device and abs(gpu - cpu) <= 0.02, detail)


def top1_list(top1):
    """'5 0.8298, 6 0.8114' (a missing top-1 as '-')."""
    return ", ".join(f"{seed} {'-' if value is None else f'{value:.4f}'}" for seed, value in top1.items())


def uninterrupted_run(args, data, work, references):
    """The uninterrupted GPU job resume and torchvision compare with: the accuracy check's (waited for, with
    --after-accuracy), else run here."""
    base = uninterrupted_base(work, args.device)
    if args.after_accuracy:
        deadline = time.monotonic() + args.wait
        while not os.path.exists(base + ".finished"):
            if time.monotonic() > deadline:
                return None, f"the accuracy check's job ({base}) did not finish within {args.wait} s"
            time.sleep(0.5)
    else:
        make_job(base, data, dict(accuracy_job(references), device=args.device))
        run_train(args.train, base, base + ".log")
    if model_bytes(base) is None:
        return None, f"the uninterrupted job wrote no model (log: {base}.log)"
    return base, None


def check_resume(args, data, work, references):
    name = "SIGTERM on the GPU, restart: model.safetensors bit-identical to the uninterrupted GPU run"
    base = os.path.join(work, f"resume-{args.device}")
    make_job(base, data, dict(accuracy_job(references), device=args.device))
    code, seen, _ = stop_at_step(start_train(args.train, base), STOP_AT, timeout=JOB_TIMEOUT, exit_timeout=300)
    keep_checkpoint(base, os.path.join(work, f"checkpoint-from-{args.device}"))
    stopped = [line for line in seen if "stopped at step" in line]
    stop_step = int(stopped[0].split("stopped at step ")[1].split()[0]) if stopped else None
    code2, output2 = run_train(args.train, base, os.path.join(work, f"resume-{args.device}.log"))
    reference, why = uninterrupted_run(args, data, work, references)
    if reference is None:
        return report(name, False, why)
    resumed, uninterrupted = model_bytes(base), model_bytes(reference)
    same = resumed is not None and resumed == uninterrupted
    return report(name, code == 143 and stop_step is not None and code2 == 0 and "resuming from" in output2 and same,
                  f"first run exit {code}, stopped at step {stop_step}; restart exit {code2}; model bytes "
                  f"{'equal' if same else 'DIFFERENT' if resumed else 'missing'}")


def keep_checkpoint(base, folder):
    """A copy of a stopped job's checkpoint, before its restart replaces it."""
    shutil.rmtree(folder, ignore_errors=True)
    source = os.path.join(base, "checkpoints")
    if os.path.isdir(source):
        shutil.copytree(source, folder)


def check_across_devices(args, data, work, references):
    """A checkpoint of one device resumes on the other: the state is the same fp32 state whatever the device."""
    name = "checkpoints cross devices: a GPU checkpoint resumes on the CPU and a CPU one on the GPU"
    job = accuracy_job(references)
    stopped = {}
    for device in (args.device, "cpu"):
        base = os.path.join(work, f"stopped-{device}")
        make_job(base, data, dict(job, device=device))
        stop_at_step(start_train(args.train, base), STOP_AT, timeout=JOB_TIMEOUT, exit_timeout=300)
        stopped[device] = os.path.join(base, "checkpoints")
    details, passed = [], True
    for source, target in ((args.device, "cpu"), ("cpu", args.device)):
        base = os.path.join(work, f"{source}-to-{target}")
        make_job(base, data, dict(job, device=target))
        if not os.path.isdir(stopped[source]):
            details.append(f"{source} to {target}: no checkpoint from the stopped {source} job")
            passed = False
            continue
        shutil.copytree(stopped[source], os.path.join(base, "checkpoints"))
        code, output = run_train(args.train, base, os.path.join(work, f"{source}-to-{target}.log"))
        ok = code == 0 and "resuming from" in output and model_bytes(base) is not None
        passed &= ok
        details.append(f"{source} checkpoint on {target}: exit {code}, "
                       f"{'resumed' if 'resuming from' in output else 'NOT resumed'}, top-1 {last_top1(output)}")
    return report(name, passed, "; ".join(details))


def check_torchvision(args, data, work, references):
    name = "the GPU model file in torchvision: logits equal to train's GPU inference (bf16 tolerance)"
    reference, why = uninterrupted_run(args, data, work, references)
    if reference is None:
        return report(name, False, why)
    try:
        import numpy as np
        import torch
        import torchvision
        from safetensors_numpy import read_safetensors, write_safetensors
    except ImportError as error:
        return report(name, False, f"{error}: this check needs numpy, PyTorch and torchvision")
    model_path = os.path.join(reference, "model", "model.safetensors")
    rng = np.random.default_rng(11)
    images = rng.standard_normal((64, 28, 28, 3)).astype(np.float32)
    images_path = os.path.join(work, "images.safetensors")
    logits_path = os.path.join(work, "train-logits.safetensors")
    write_safetensors(images_path, {"images": images})
    precision = ["bf16"] if args.device == "cuda" else []
    result = subprocess.run(shlex.split(args.infer) + ["18", "10", model_path, images_path, logits_path] + precision,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if result.returncode != 0:
        return report(name, False, f"gpu_infer exited {result.returncode}: {result.stdout[-500:]}")
    produced = read_safetensors(logits_path)
    ours = produced.get("logits", produced.get("eval_logits")).astype(np.float64)
    model = torchvision.models.resnet18(num_classes=10)
    state = {key: torch.from_numpy(np.array(value)) for key, value in read_safetensors(model_path).items()}
    model.load_state_dict(state, strict=True)
    model.eval()
    with torch.no_grad():
        theirs = model(torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()).double().numpy()
    rel_l2 = float(np.linalg.norm(ours - theirs) / np.linalg.norm(theirs))
    cosine = float((ours * theirs).sum() / (np.linalg.norm(ours) * np.linalg.norm(theirs)))
    agree = float((ours.argmax(1) == theirs.argmax(1)).mean())
    return report(name, rel_l2 < 2e-2 and cosine > 0.999 and agree >= 0.95,
                  f"strict load ok; rel L2 {rel_l2:.2e} (< 2e-2), cosine {cosine:.6f} (> 0.999), top-1 agreement "
                  f"{agree:.3f} (>= 0.95) on 64 images")


def check_fast_path(args, data, work, references):
    """The fast path trains the same bytes as the reference path, on the device under test."""
    def run(fast):
        base = os.path.join(work, f"fast-path-{fast}")
        make_job(base, data, dict(JOB, device=args.device, max_steps=str(args.fast_steps)))
        code, output = run_train(args.train, base, os.path.join(work, f"fast-path-{fast}.log"),
                                 env={"TRAIN_SHARED_GRADIENT_BUFFERS": fast})
        return code, model_bytes(base), output

    (code0, bytes0, _), (code1, bytes1, output1) = side_by_side((run, "0"), (run, "1"))
    same = bytes0 is not None and bytes0 == bytes1
    detail = (f"{args.fast_steps} steps; reference exit {code0}, fast path exit {code1}; model.safetensors "
              f"{'byte for byte equal' if same else 'DIFFERENT' if bytes0 and bytes1 else 'missing'}")
    if code1 != 0:
        detail += " | fast path log tail: " + tail(output1, 4)
    return report(f"TRAIN_SHARED_GRADIENT_BUFFERS=1 on {args.device}: the same model bytes as the reference path",
                  code0 == 0 and code1 == 0 and same, detail)


def nccl_said(output):
    """NCCL's own words in a failed job's log (its WARN lines, or the rank's NCCL error)."""
    lines = [line for line in output.splitlines() if "NCCL" in line and ("WARN" in line or "error" in line.lower())]
    return " / ".join(lines[-4:])[:600]


def check_two_ranks(args, data, work, references):
    """Two ranks on one GPU (NCCL over sockets) against the references' two CPU ranks, fp32."""
    name = f"two ranks on one {args.device} (NCCL socket transport) against two CPU ranks, fp32"
    carried = references["two_ranks"]
    if carried["subsets"] != TWO_RANK_SUBSETS:
        return report(name, False, f"the references' subsets {carried['subsets']} are not this script's "
                                   f"{TWO_RANK_SUBSETS}: remake the bundle")
    runs = dict(zip(TWO_RANK_SUBSETS, side_by_side(
        *[(run_two_ranks, args.train, carried["job"], data, work, subset_name, args.device)
          for subset_name in TWO_RANK_SUBSETS])))
    details, passed = [], True
    for subset_name, (code, output, _, _) in runs.items():
        if code != 0:
            passed = False
            said = nccl_said(output) if args.device == "cuda" else ""
            details.append(f"{subset_name}: exit {code}" + (f"; NCCL: {said}" if said else "") +
                           " | log tail: " + tail(output, 3))
    if not passed:
        return report(name, False, "; ".join(details))
    # The same samples on each rank, step by step.
    for subset_name in TWO_RANK_SUBSETS:
        ours, theirs = runs[subset_name][3], carried[subset_name]["samples"]
        same = all(ours[r] is not None and ours[r] == theirs[r] for r in ("0", "1"))
        passed &= same
        details.append(f"{subset_name}: samples per rank {'identical' if same else 'DIFFER'}")
    # The averaged gradient of the first step: the momentum buffer after one step (the gradient plus weight
    # decay times the same initial weights on both devices).
    bars = TWO_RANK_BARS
    state, tensors = checkpoint_of(runs["one-step"][2])
    wanted = carried["one-step"]["momentum"]
    if tensors is None or (state or {}).get("step") != 1 or momentum_names(tensors) != sorted(wanted):
        passed = False
        details.append(f"one-step: no checkpoint with the {len(wanted)} momentum buffers after exactly one step")
    else:
        together, worst = digests_difference(wanted, tensors, sorted(wanted))
        passed &= together <= bars["gradient"] and worst[0] <= bars["gradient_tensor"]
        details.append(f"first step's averaged gradient (momentum, {len(wanted)} tensors): rel L2 {together:.1e} "
                       f"(<= {bars['gradient']:.0e}), worst tensor {worst[0]:.1e} (<= {bars['gradient_tensor']:.0e}, "
                       f"{worst[1]})")
    # Twelve steps: losses (steps 1 and 2 closely; later ones within this job's measured fp32 noise), checkpoint,
    # timing lines.
    output = runs["twelve-steps"][1]
    ours, theirs = losses_of(output), carried["twelve-steps"]["losses"]
    steps = sorted(set(ours) & set(theirs), key=int)
    difference = {k: abs(float(ours[k]) - float(theirs[k])) / float(theirs[k]) for k in steps}
    first = max((difference[k] for k in steps if int(k) <= 2), default=float("inf"))
    later = [difference[k] for k in steps if int(k) > 2]
    later_mean = sum(later) / len(later) if later else float("inf")
    ok = (len(steps) >= 5 and len(steps) == len(theirs) and first <= bars["loss_steps_1_2"]
          and later_mean <= bars["loss_later_mean"])
    passed &= ok
    details.append(f"losses at {len(steps)} of {len(theirs)} log lines: steps 1-2 rel diff {first:.1e} "
                   f"(<= {bars['loss_steps_1_2']:.0e}), later steps mean {later_mean:.1e} "
                   f"(<= {bars['loss_later_mean']:.0e}; each: "
                   + " ".join(f"{k}:{difference[k]:.1e}" for k in steps) + ")")
    state, tensors = checkpoint_of(runs["twelve-steps"][2])
    if state is None:
        passed = False
        details.append("twelve-steps: no checkpoint")
    else:
        keys = ("step", "epoch", "step_in_epoch", "world_size")
        same_state = all(state.get(k) == carried["twelve-steps"]["state"].get(k) for k in keys)
        weights = carried["twelve-steps"]["weights"]
        same_names = sorted(tensors) == carried["twelve-steps"]["tensors"]
        # The parameters (what has a momentum buffer); the batch-norm statistics follow from them.
        parameters = sorted(n for n in weights if "optimizer.momentum." + n in carried["one-step"]["momentum"])
        together, worst = digests_difference(weights, tensors, parameters)
        ok = same_state and same_names and bool(parameters) and together <= bars["parameters"]
        passed &= ok
        details.append(f"checkpoint: state {'equal' if same_state else 'DIFFERS'} (step {state.get('step')}), "
                       f"{len(tensors)} tensors{'' if same_names else ' (names DIFFER)'}, {len(parameters)} "
                       f"parameters rel L2 {together:.1e} (<= {bars['parameters']:.0e}; worst tensor {worst[0]:.1e}, "
                       f"{worst[1]}, not judged: it amplifies rounding)")
    timing = re.findall(r"timing step=\d+ .*reduction_wait max=([0-9.]+) \(rank (\d) on [^)]*\) min=([0-9.]+) "
                        r"\(rank (\d)", output)
    ranks_named = {rank for line in timing for rank in (line[1], line[3])}
    waited = any(float(line[0]) > 0 for line in timing)
    ok = len(timing) >= 5 and ranks_named == {"0", "1"} and waited
    passed &= ok
    details.append(f"{len(timing)} timing lines naming ranks {sorted(ranks_named)}, reduction wait measured "
                   f"{'> 0' if waited else 'ZERO'}")
    return report(name, passed, "; ".join(details))


def check_timeline(args, data, work, ranks):
    """A job's timeline on the device: the device's own tracks, buckets under backward, a summary that adds up."""
    name = f"timeline of a {ranks}-rank job on the {args.device} (steps 11-20)"
    base = os.path.join(work, f"timeline-{ranks}")
    make_job(base, data, dict(JOB, device=args.device, processes_per_host=str(ranks), max_steps="30",
                              timeline_steps="11-20"))
    code, output = run_train(args.train, base, os.path.join(work, f"timeline-{ranks}.log"),
                             env={"TRAIN_RANKS_SHARE_GPUS": "1"})
    if code != 0:
        return report(name, False, f"exit {code}: " + tail(output, 5))
    problems, details = [], []
    try:
        _, events = read_trace(os.path.join(base, "output", "data", "timeline", "timeline.json"))
    except Exception as error:  # noqa: BLE001 - an invalid file is the failed check, reported
        return report(name, False, f"timeline.json: {error}")
    device = args.device == "cuda"
    for rank in range(ranks):
        spans = [e for e in events if e["ph"] == "X" and e["pid"] == rank]
        names = {e["name"] for e in spans}
        wanted = {"forward", "backward", "loss", "optimizer", "waiting for reductions", "backward layer1",
                  "forward stem", "allreduce bucket 0"} | ({"waiting for input", "host-to-device copy"} if device else
                                                           {"waiting for data"})
        if wanted - names:
            problems.append(f"rank {rank} lacks {sorted(wanted - names)}")
        steps = sorted((e for e in spans if e["cat"] == "step"), key=lambda e: e["ts"])
        backward = sorted((e for e in spans if e["name"] == "backward"), key=lambda e: e["ts"])
        first = sorted((e for e in spans if e["tid"] == 100), key=lambda e: e["ts"])
        if len(steps) != 10 or len(backward) != 10 or len(first) != 10:
            problems.append(f"rank {rank}: {len(steps)} steps, {len(backward)} backward, {len(first)} bucket 0 spans")
            continue
        if not all(b["ts"] < bucket["ts"] < b["ts"] + b["dur"] for b, bucket in zip(backward, first)):
            problems.append(f"rank {rank}: bucket 0 does not start inside backward")
        totals = step_shares(spans)
        total = totals["step"]
        counted = totals["data_wait"] + totals["compute"] + totals["exposed_communication"]
        if abs(total - counted) > total / 20:
            problems.append(f"rank {rank}: counted {counted} of {total} us")
        line = re.search(rf"timeline rank={rank} .*", output)
        details.append(line.group(0) if line else f"rank {rank}: no summary line")
    return report(name, not problems, "; ".join(problems + details))


CHECKS = {
    "accuracy": check_accuracy,
    "resume": check_resume,
    "torchvision": check_torchvision,
    "fast": check_fast_path,
    "two-ranks": check_two_ranks,
    "timeline-1": lambda args, data, work, references: check_timeline(args, data, work, 1),
    "timeline-2": lambda args, data, work, references: check_timeline(args, data, work, 2),
    "across": check_across_devices,
}
NEED_REFERENCES = ("accuracy", "two-ranks")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a Fashion-MNIST image folder (train/, validation/)")
    parser.add_argument("--train", default=os.path.join(ROOT, "build", "train"))
    parser.add_argument("--infer", default=os.path.join(ROOT, "build", "tests", "gpu", "gpu_infer"))
    parser.add_argument("--work", default=None)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="the device under test")
    parser.add_argument("--checks", default="accuracy,resume,torchvision,fast,two-ranks,timeline-1,timeline-2",
                        help="comma-separated: " + ", ".join(CHECKS))
    parser.add_argument("--references", default=None, help="a folder with references.json (--make-references)")
    parser.add_argument("--after-accuracy", action="store_true",
                        help="resume and torchvision wait for the accuracy check's job in --work (another process)")
    parser.add_argument("--wait", type=int, default=600, help="seconds --after-accuracy waits at most")
    parser.add_argument("--fast-steps", type=int, default=60, help="steps of each fast-path job")
    parser.add_argument("--make-references", metavar="OUT", default=None,
                        help="run the CPU's side (device=cpu) and write OUT/references.json; no checks")
    parser.add_argument("--epochs", type=int, default=int(JOB["epochs"]), help="of the accuracy job (--make-references)")
    if sys.argv[1:] == ["--references-key"]:
        print(references_key())
        return 0
    args = parser.parse_args()
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="gpu-training-check-"))
    os.makedirs(work, exist_ok=True)
    data = os.path.abspath(args.data)
    if not os.path.isdir(os.path.join(data, "train")) or not os.path.isdir(os.path.join(data, "validation")):
        parser.error(f"--data {args.data}: expected an image folder with train/ and validation/ "
                     "(scripts/data/make_fashion_mnist_folder.py writes one)")
    if args.make_references:
        return make_references(args, data, work)
    checks = [c for c in args.checks.split(",") if c]
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        parser.error(f"unknown checks {unknown}; choose from {', '.join(CHECKS)}")
    references, why = load_references(args, data)
    results = []
    for check in checks:
        if check in NEED_REFERENCES and references is None:
            results.append(report(f"{check}: against the CPU's references", False, why))
            continue
        try:
            results.append(CHECKS[check](args, data, work, references))
        except Exception as error:  # noqa: BLE001 - a missing file or a crash of this script is a failed check
            results.append(report(check, False, f"the check itself failed: {error!r}"[:400]))
    print(f"logs and jobs: {work}", flush=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
