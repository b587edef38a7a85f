#!/usr/bin/env python3
"""One SGD step of `train` itself on the CPU against torchvision's float64 gradient, on train's decisions.

`train` (the real launcher: mpirun, ranks, the image-folder loader, the model, the MPI buckets) runs one step
from given weights (torchvision's initialisation, batch-norm parameters and buffers away from their defaults)
on a folder of random 8-bit PNGs, shuffle off, no augmentation, fp32. Its checkpoint's momentum after that one
step (momentum 0.9, weight decay 0: SGD's momentum starts at the gradient) is the rank-averaged gradient, and
its model file holds rank 0's BN running statistics. For each rank's shard (DistributedSampler, shuffle off),
tests/model/model_check runs the model's own float32 step, which says how every ReLU and max-pool window
decided; torchvision then computes the step in float64 on those decisions (torch_reference.py says why: a
decision within float32's rounding of a tie goes either way in any float32 implementation, PyTorch's own
included, and moves a gradient by ~1e-2). A case passes when
  - every gradient is within max(1e-4, 5 x PyTorch float32's error on the same decisions) of float64's, and
    rank 0's running statistics within max(1e-5, 5 x PyTorch float32's error);
  - every decision float64 takes otherwise is within 8 RMS float32 errors of a tie (else it is a wrong value);
  - train's averaged gradient equals the model's step on each shard (scaled by 1/ranks as a rank scales it),
    summed, to 1e-6 (the loader, the shards and the buckets add nothing).

    tests/model/train_step_sweep.py --train build/train --model-check build/tests/model/model_check
                                    [--seeds 20] [--depths 18,34,50] [--ranks 1,2,3] [--cases D:R:S,...] [--size 48]
                                    [--classes 3] [--per-class 4] [--work DIR] [--jobs N]

Prints one line per case and what failed in a failing one; exits 1 when any case failed. The whole sweep (20
seeds x ResNet-18/34/50 x 1, 2 and 3 ranks) is the issue's; ctest runs a slice of it (tests/model/CMakeLists.txt).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
from safetensors_numpy import read_safetensors, write_safetensors  # noqa: E402
from torch_reference import AMBIGUITY, StepReference, decisions_of, initial_model, relative, tolerance  # noqa: E402

MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])
MOMENTUM_PREFIX = "optimizer.momentum."
# Against float64 on train's own decisions (torch_reference.py): per gradient max(this, 5x PyTorch float32's
# own error on the same decisions); per running statistic max(RUNNING_FLOOR, 5x PyTorch float32's error).
GRADIENT_FLOOR = 1e-4
RUNNING_FLOOR = 1e-5
# train's averaged gradient against the model's own step on each shard, summed (the same float32 code on the
# same inputs and scale: only the order of the ranks' float32 sum may differ).
PIPELINE_TOLERANCE = 1e-6


def make_images(folder, seed, classes, per_class, size):
    """classes x per_class random RGB PNGs of size x size: uniform noise, in class folders c0, c1, ...
    Returns the images as float32 [N, 3, H, W], normalised with train's own float32 arithmetic (so that the
    model's step here sees the very values train's does), in the folder's sorted order, and their labels."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for c in range(classes):
        os.makedirs(os.path.join(folder, f"c{c}"))
        for i in range(per_class):
            pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
            Image.fromarray(pixels, "RGB").save(os.path.join(folder, f"c{c}", f"img{i:03d}.png"))
            images.append(normalised(pixels).transpose(2, 0, 1))
            labels.append(c)
    return np.stack(images), np.array(labels)


def normalised(pixels):
    """(p / 255 - mean) / std as train computes it (runtime/data/images/transform.cpp, normalised_value): one
    float32 multiply and one float32 add, with constants from the float32 mean and std worked out in double."""
    mean, std = np.float32(MEAN).astype(np.float64), np.float32(STD).astype(np.float64)
    scale = (1.0 / (255.0 * std)).astype(np.float32)
    bias = (-mean / std).astype(np.float32)
    return (pixels.astype(np.float32) * scale).astype(np.float32) + bias


def shards(count, ranks):
    """DistributedSampler(shuffle=False, drop_last=False): the indices padded to a multiple of the ranks by
    repeating the first ones, rank r taking every ranks-th from r."""
    total = -(-count // ranks) * ranks
    indices = list(range(count)) + list(range(total - count))
    return [indices[r::ranks] for r in range(ranks)]


def run_train(train, base, depth, size, classes, ranks, per_host_batch, timeout):
    config = os.path.join(base, "input", "config")
    hyperparameters = {
        "num_layers": str(depth), "image_shape": f"3,{size},{size}", "num_classes": str(classes),
        "mini_batch_size": str(per_host_batch), "processes_per_host": str(ranks), "epochs": "1",
        "max_steps": "1", "learning_rate": "0.1", "warmup_epochs": "0", "optimizer": "sgd", "momentum": "0.9",
        "weight_decay": "0", "label_smoothing": "0", "augmentation_type": "none", "shuffle": "false",
        "precision_dtype": "float32", "device": "cpu", "checkpoint_frequency": "1",
    }
    with open(os.path.join(config, "hyperparameters.json"), "w") as f:
        json.dump(hyperparameters, f)
    with open(os.path.join(config, "inputdataconfig.json"), "w") as f:
        json.dump({"train": {"TrainingInputMode": "File"}, "model": {"TrainingInputMode": "File"}}, f)
    env = dict(os.environ, SAGEMAKER_BASE_DIR=base, OMP_NUM_THREADS="1")
    result = subprocess.run([train], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=timeout)
    with open(os.path.join(base, "train.log"), "w") as f:
        f.write(result.stdout)
    return result.returncode, result.stdout


def run_case(train, model_check, work, depth, ranks, seed, size, classes, per_class, timeout, keep):
    """One case: returns (passed, one-line summary, the worst tensors' lines)."""
    name = f"resnet{depth} ranks={ranks} seed={seed}"
    base = os.path.join(work, f"r{depth}-n{ranks}-s{seed}")
    shutil.rmtree(base, ignore_errors=True)
    for folder in ("input/config", "input/data/model"):
        os.makedirs(os.path.join(base, folder))
    count = classes * per_class
    images, labels = make_images(os.path.join(base, "input", "data", "train"), seed, classes, per_class, size)
    model = initial_model(depth, classes, 1000 + seed)
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(base, "input", "data", "model", "model.safetensors"), state)

    code, output = run_train(train, base, depth, size, classes, ranks, -(-count // ranks) * ranks, timeout)
    checkpoint = os.path.join(base, "checkpoints", "checkpoint.safetensors")
    if code != 0 or not os.path.exists(checkpoint):
        tail = " / ".join(output.strip().splitlines()[-4:])
        return False, f"{name}: train exit {code} ({tail})", []
    saved = read_safetensors(checkpoint)
    written = read_safetensors(os.path.join(base, "model", "model.safetensors"))

    per_rank = shards(count, ranks)
    decisions, model_step = [], None
    for rank, shard in enumerate(per_rank):
        outputs = model_check_step(model_check, base, rank, ranks, state, depth, classes, images[shard],
                                   labels[shard])
        decisions.append(decisions_of(outputs))
        model_step = add_gradients(model_step, {n[len("grad."):]: g.astype(np.float64) for n, g in outputs.items()
                                                if n.startswith("grad.")})
    reference = StepReference(model, [images[shard] for shard in per_rank], [labels[shard] for shard in per_rank])
    exact, single, others = reference.on_decisions(decisions)
    allowed = tolerance(exact, single, floor=GRADIENT_FLOOR)
    ours = {name: saved[MOMENTUM_PREFIX + name] for name in exact}
    rows = [(relative(ours[t], exact[t]) / allowed[t], t, relative(ours[t], exact[t]), allowed[t]) for t in exact]
    running_allowed = tolerance(reference.running, reference.single_running, floor=RUNNING_FLOOR)
    rows += [(relative(written[t], e) / running_allowed[t], t, relative(written[t], e), running_allowed[t])
             for t, e in reference.running.items()]
    rows.sort(reverse=True)
    problems = [f"  {t}: {error:.2e} against float64 on train's decisions (tolerance {limit:.1e})"
                for ratio, t, error, limit in rows if ratio > 1]
    problems += [f"  rank {rank}: {what} by {margin:.1f} RMS float32 errors of float64's margin: not rounding"
                 for rank, margin, what in others if margin >= AMBIGUITY]
    # train's whole step (loader, ranks, buckets) against the model's own step on each shard, averaged.
    pipeline = max(relative(ours[t], model_step[t]) for t in exact)
    if pipeline > PIPELINE_TOLERANCE:
        problems.append(f"  train's averaged gradient differs from the model's step on each shard by {pipeline:.1e}")
    if not keep and not problems:
        shutil.rmtree(base, ignore_errors=True)
    plain = max(relative(ours[t], reference.plain[t]) for t in exact)
    torch_plain = max(relative(reference.single[t], reference.plain[t]) for t in exact)
    worst = rows[0]
    gradient = max((row for row in rows if row[1] in exact), key=lambda row: row[2])
    summary = (f"{name}: {'PASS' if not problems else 'FAIL'}: worst {worst[1]} {worst[2]:.1e} (tolerance "
               f"{worst[3]:.0e}; worst gradient {gradient[1]} {gradient[2]:.1e}) against float64 on train's decisions, {len(others)} of them float64 takes otherwise "
               f"(largest margin {max((m for _, m, _ in others), default=0):.1f} RMS float32 errors); train vs the "
               f"model per shard {pipeline:.0e}; against float64's own decisions {plain:.0e} (torch float32 "
               f"{torch_plain:.0e})")
    return not problems, summary, problems


def model_check_step(model_check, base, rank, ranks, state, depth, classes, images, labels):
    """The model's own training step (tests/model/model_check, float) on one rank's shard, its loss gradient
    scaled by 1/ranks in float32 as a rank scales it (runtime/cpu_engine.cpp): its gradients and decisions."""
    weights, batch, out = (os.path.join(base, f"model-check-{rank}-{what}.safetensors")
                           for what in ("weights", "batch", "out"))
    write_safetensors(weights, state)
    write_safetensors(batch, {"images": np.ascontiguousarray(images.transpose(0, 2, 3, 1)),
                              "labels": labels.astype(np.int64)})
    scale = repr(float(np.float32(1) / np.float32(ranks)))
    subprocess.run([model_check, str(depth), str(classes), "float", weights, batch, out, "0", scale], check=True,
                   timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    return read_safetensors(out)


def add_gradients(total, gradients):
    return dict(gradients) if total is None else {n: total[n] + gradients[n] for n in total}


def seed_list(text):
    if "," in text:
        return [int(s) for s in text.split(",")]
    if "-" in text:
        first, last = map(int, text.split("-"))
        return list(range(first, last + 1))
    return list(range(int(text)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", required=True)
    parser.add_argument("--model-check", required=True, help="tests/model/model_check of the same build")
    parser.add_argument("--seeds", default="20", help="N (seeds 0 to N-1), FIRST-LAST, or a comma-separated list")
    parser.add_argument("--depths", default="18,34,50")
    parser.add_argument("--ranks", default="1,2,3")
    parser.add_argument("--cases", default=None, help="DEPTH:RANKS:SEED,... instead of the grid of the three above")
    parser.add_argument("--size", type=int, default=48)
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--per-class", type=int, default=4)
    parser.add_argument("--work", default=None, help="where the jobs go (kept when failing); default a temporary folder")
    parser.add_argument("--jobs", type=int, default=1, help="cases at once")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per train job")
    parser.add_argument("--keep", action="store_true", help="keep every job's folder")
    args = parser.parse_args()
    seeds = seed_list(args.seeds)
    cases = [(d, r, s) for d in map(int, args.depths.split(",")) for r in map(int, args.ranks.split(","))
             for s in seeds]
    if args.cases:
        cases = [tuple(map(int, case.split(":"))) for case in args.cases.split(",")]
    work = args.work or tempfile.mkdtemp(prefix="train-step-sweep-")
    os.makedirs(work, exist_ok=True)
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_case, os.path.abspath(args.train), os.path.abspath(args.model_check), work, d, r, s, args.size, args.classes,
                               args.per_class, args.timeout, args.keep) for d, r, s in cases]
        for future in futures:
            passed, summary, worst = future.result()
            failures += not passed
            print(summary, flush=True)
            for line in worst:
                print(line, flush=True)
    print(f"{len(cases) - failures} of {len(cases)} cases within tolerance (jobs in {work})")
    if not args.work and not failures and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
