#!/usr/bin/env python3
"""`train` itself on a GPU: a real job with device=cuda against the same job on the CPU, stop and resume on
the GPU, the GPU's model file in torchvision, the fast path byte for byte, and two ranks on one GPU. Run by
scripts/gpu/gpu_check.sh on a machine with a GPU.

    python3 scripts/gpu/gpu_training_check.py --data FASHION [--train CMD] [--infer CMD] [--work DIR]
                                          [--checks LIST] [--device cuda|cpu] [--epochs N] [--fast-steps N]

FASHION is a Fashion-MNIST image folder (train/ and validation/, as scripts/data/make_fashion_mnist_folder.py
writes it) or a .tgz of one. --train runs `train` (default build/train; on a bundle machine
"bash .gpu-bundle/run.sh train"); --infer runs tests/gpu/gpu_infer likewise. --checks picks from:
  accuracy    ResNet-18 at 28x28, 1 rank, batch 128, 4 epochs (a few hundred steps), device=cuda (bf16) and
              device=cpu on the same data and hyperparameters: both validation top-1 printed, within 2 points;
  resume      the same GPU job stopped by SIGTERM at step 40 and restarted: model.safetensors bytes equal to
              the uninterrupted GPU run's (deterministic cuDNN algorithms, no float atomics);
  across      a checkpoint written by the stopped GPU job resumes with device=cpu, and one written by a CPU
              job stopped the same way resumes with device=cuda (both finish and write their model);
  torchvision the GPU run's model.safetensors loads strictly into torchvision.models.resnet18(num_classes=10),
              whose logits (fp32) on 64 random images match train's own GPU inference (bf16) to bf16 tolerance;
  fast        the same GPU job (--fast-steps steps) with TRAIN_FAST_PATH=1 and without: model.safetensors
              byte for byte equal (the fast path changes where values live, not one of them);
  two-ranks   two ranks on one GPU (TRAIN_RANKS_SHARE_GPUS=1: each rank its own NCCL host id, NCCL's socket
              transport) against two CPU ranks, fp32, same data and hyperparameters: the same samples on each
              rank, the averaged gradient of the first step (the momentum buffer of a one-step job's
              checkpoint) within fp32 tolerance, a twelve-step job's losses, checkpoint (state and tensors)
              and per-rank timing lines. When NCCL refuses, the check fails with what NCCL said.
  timeline    timeline_steps=11-20 with 1 rank and with 2 ranks on the one GPU (TRAIN_RANKS_SHARE_GPUS=1):
              the files are valid trace JSON (tests/support/chrome_trace.py), each rank has the GPU's tracks
              (compute stream steps, waits for input, forward/backward by layer group, the copy stream's
              uploads, each bucket on the communication stream), the first bucket starts before backward ends,
              and the summary adds up to the compute stream's step time within 5%.
(default: all of them). Prints one line per check, "CHECK|name|PASS or FAIL|detail", and exits 1 when any
failed.

--device cpu runs the same checks with the CPU standing in for the GPU: a test of this script on a machine
without one (--infer "build/tests/model/model_check infer", a small --data), run by ctest for fast and
two-ranks so that a GPU loan is not spent on this script's own mistakes.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from stop_at_step import stop_at_step  # noqa: E402
from chrome_trace import read_trace, step_shares  # noqa: E402

JOB = {"num_layers": "18", "image_shape": "3,28,28", "mini_batch_size": "128", "processes_per_host": "1",
       "epochs": "4", "learning_rate": "0.2", "warmup_epochs": "0.5", "augmentation_type": "none", "seed": "5",
       "checkpoint_frequency": "1"}
STOP_AT = 40


def report(name, passed, detail):
    print(f"CHECK|{name}|{'PASS' if passed else 'FAIL'}|{detail}", flush=True)
    return passed


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


def run_train(command, base, log, timeout=1800, env=None):
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


def last_top1(output):
    found = re.findall(r"validation_top1=([0-9.]+)", output)
    return float(found[-1]) if found else None


def model_bytes(base):
    path = os.path.join(base, "model", "model.safetensors")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return f.read()


def check_accuracy(args, data, work):
    results = {}
    for device in dict.fromkeys((args.device, "cpu")):  # once when the CPU stands in for the GPU
        base = os.path.join(work, f"fashion-{device}")
        make_job(base, data, dict(JOB, device=device))
        started = time.monotonic()
        code, output = run_train(args.train, base, os.path.join(work, f"fashion-{device}.log"))
        seconds = time.monotonic() - started
        first = next((line for line in output.splitlines() if "device " in line and "rank 0 of" in line), "")
        results[device] = (code, last_top1(output), seconds, first.split("] ")[-1], output)
    gpu, cpu = results[args.device], results["cpu"]
    detail = (f"GPU top-1 {gpu[1]} ({gpu[2]:.0f} s, exit {gpu[0]}; {gpu[3]}), CPU top-1 {cpu[1]} "
              f"({cpu[2]:.0f} s, exit {cpu[0]})")
    passed = (gpu[0] == 0 and cpu[0] == 0 and gpu[1] is not None and cpu[1] is not None and
              abs(gpu[1] - cpu[1]) <= 0.02 and f"device {args.device}" in gpu[3])
    if gpu[0] != 0:
        detail += " | GPU log tail: " + " / ".join(gpu[4].splitlines()[-5:])
    passed = report("train device=cuda vs device=cpu, Fashion-MNIST validation top-1 (within 2 points)", passed,
                    detail)
    return passed, os.path.join(work, f"fashion-{args.device}")


def check_resume(args, data, work, reference):
    base = os.path.join(work, f"resume-{args.device}")
    make_job(base, data, dict(JOB, device=args.device))
    code, seen, _ = stop_at_step(start_train(args.train, base), STOP_AT, timeout=900, exit_timeout=300)
    keep_checkpoint(base, os.path.join(work, f"checkpoint-from-{args.device}"))
    stop_step = None
    stopped = [line for line in seen if "stopped at step" in line]
    if stopped:
        stop_step = int(stopped[0].split("stopped at step ")[1].split()[0])
    code2, output2 = run_train(args.train, base, os.path.join(work, f"resume-{args.device}.log"))
    resumed, uninterrupted = model_bytes(base), model_bytes(reference)
    same = resumed is not None and resumed == uninterrupted
    return report("SIGTERM on the GPU, restart: model.safetensors bit-identical to the uninterrupted GPU run",
           code == 143 and stop_step is not None and code2 == 0 and "resuming from" in output2 and same,
           f"first run exit {code}, stopped at step {stop_step}; restart exit {code2}; model bytes "
           f"{'equal' if same else 'DIFFERENT' if resumed else 'missing'}")


def keep_checkpoint(base, folder):
    """A copy of a stopped job's checkpoint, before its restart replaces it."""
    shutil.rmtree(folder, ignore_errors=True)
    source = os.path.join(base, "checkpoints")
    if os.path.isdir(source):
        shutil.copytree(source, folder)


def check_across_devices(args, data, work):
    """A checkpoint of one device resumes on the other: the state is the same fp32 state whatever the device."""
    # A CPU job stopped as the GPU one was, for the other direction.
    cpu_base = os.path.join(work, "stopped-cpu")
    make_job(cpu_base, data, dict(JOB, device="cpu"))
    stop_at_step(start_train(args.train, cpu_base), STOP_AT, timeout=1800, exit_timeout=300)
    keep_checkpoint(cpu_base, os.path.join(work, "checkpoint-from-cpu"))
    details, passed = [], True
    for source, target in ((args.device, "cpu"), ("cpu", args.device)):
        checkpoint = os.path.join(work, f"checkpoint-from-{source}")
        base = os.path.join(work, f"{source}-to-{target}")
        make_job(base, data, dict(JOB, device=target))
        if not os.path.isdir(checkpoint):
            details.append(f"{source} to {target}: no checkpoint from the stopped {source} job")
            passed = False
            continue
        shutil.copytree(checkpoint, os.path.join(base, "checkpoints"))
        code, output = run_train(args.train, base, os.path.join(work, f"{source}-to-{target}.log"))
        ok = code == 0 and "resuming from" in output and model_bytes(base) is not None
        passed &= ok
        details.append(f"{source} checkpoint on {target}: exit {code}, "
                       f"{'resumed' if 'resuming from' in output else 'NOT resumed'}, top-1 {last_top1(output)}")
    return report("checkpoints cross devices: a GPU checkpoint resumes on the CPU and a CPU one on the GPU", passed,
                  "; ".join(details))


def check_torchvision(args, work, reference):
    import numpy as np
    import torch
    import torchvision
    from safetensors_numpy import read_safetensors, write_safetensors

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
        return report("the GPU model file in torchvision: logits equal to train's GPU inference", False,
                      f"gpu_infer exited {result.returncode}: {result.stdout[-500:]}")
    produced = read_safetensors(logits_path)
    ours = produced.get("logits", produced.get("eval_logits")).astype(np.float64)
    model = torchvision.models.resnet18(num_classes=10)
    state = {name: torch.from_numpy(np.array(value)) for name, value in read_safetensors(model_path).items()}
    model.load_state_dict(state, strict=True)
    model.eval()
    with torch.no_grad():
        theirs = model(torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()).double().numpy()
    rel_l2 = float(np.linalg.norm(ours - theirs) / np.linalg.norm(theirs))
    cosine = float((ours * theirs).sum() / (np.linalg.norm(ours) * np.linalg.norm(theirs)))
    agree = float((ours.argmax(1) == theirs.argmax(1)).mean())
    return report("the GPU model file in torchvision: logits equal to train's GPU inference (bf16 tolerance)",
           rel_l2 < 2e-2 and cosine > 0.999 and agree >= 0.95,
           f"strict load ok; rel L2 {rel_l2:.2e} (< 2e-2), cosine {cosine:.6f} (> 0.999), top-1 agreement "
           f"{agree:.3f} (>= 0.95) on 64 images")


def check_fast_path(args, data, work):
    """The fast path trains the same bytes as the reference path, on the device under test."""
    results = {}
    for fast in ("0", "1"):
        base = os.path.join(work, f"fast-path-{fast}")
        make_job(base, data, dict(JOB, device=args.device, max_steps=str(args.fast_steps)))
        code, output = run_train(args.train, base, os.path.join(work, f"fast-path-{fast}.log"),
                                 env={"TRAIN_FAST_PATH": fast})
        results[fast] = (code, model_bytes(base), output)
    (code0, bytes0, _), (code1, bytes1, output1) = results["0"], results["1"]
    same = bytes0 is not None and bytes0 == bytes1
    detail = (f"{args.fast_steps} steps; reference exit {code0}, fast path exit {code1}; model.safetensors "
              f"{'byte for byte equal' if same else 'DIFFERENT' if bytes0 and bytes1 else 'missing'}")
    if code1 != 0:
        detail += " | fast path log tail: " + " / ".join(output1.splitlines()[-4:])
    return report(f"TRAIN_FAST_PATH=1 on {args.device}: the same model bytes as the reference path", code0 == 0 and
                  code1 == 0 and same, detail)


def subset(data, folder, per_class):
    """An image folder with the first `per_class` training images of each class (links to `data`'s)."""
    shutil.rmtree(folder, ignore_errors=True)
    for split, count in (("train", per_class), ("validation", 2)):
        for label in sorted(os.listdir(os.path.join(data, split))):
            os.makedirs(os.path.join(folder, split, label))
            for name in sorted(os.listdir(os.path.join(data, split, label)))[:count]:
                os.symlink(os.path.join(data, split, label, name), os.path.join(folder, split, label, name))
    return folder


TWO_RANKS = {"num_layers": "18", "image_shape": "3,28,28", "mini_batch_size": "64", "processes_per_host": "2",
             "epochs": "1", "learning_rate": "0.05", "augmentation_type": "none", "seed": "9",
             "precision_dtype": "float32", "checkpoint_frequency": "1"}


def run_two_ranks(args, data, work, name, device):
    """A two-rank job on `device` (two ranks on one GPU for cuda); returns (exit, output, base, sample log)."""
    base = os.path.join(work, f"two-ranks-{name}-{device}")
    make_job(base, data, dict(TWO_RANKS, device=device))
    samples = os.path.join(work, f"two-ranks-{name}-{device}-samples")
    shutil.rmtree(samples, ignore_errors=True)
    os.makedirs(samples)
    env = {"TRAIN_SAMPLE_LOG": samples}
    if device == "cuda":
        env["TRAIN_RANKS_SHARE_GPUS"] = "1"
    code, output = run_train(args.train, base, os.path.join(work, f"two-ranks-{name}-{device}.log"), timeout=900,
                             env=env)
    logs = {}
    for rank in (0, 1):
        path = os.path.join(samples, f"rank-{rank}.txt")
        logs[rank] = open(path).read() if os.path.exists(path) else None
    return code, output, base, logs


def relative_l2(a, b):
    import numpy as np
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norm = float(np.linalg.norm(b))
    return float(np.linalg.norm(a - b)) / norm if norm > 0 else float(np.linalg.norm(a - b))


def checkpoint_of(base):
    """(state metadata, tensors) of a job's newest checkpoint, or (None, None)."""
    from safetensors_numpy import read_safetensors
    path = os.path.join(base, "checkpoints", "checkpoint.safetensors")
    if not os.path.exists(path):
        return None, None
    with open(path, "rb") as f:
        raw = f.read()
    import struct
    (length,) = struct.unpack("<Q", raw[:8])
    metadata = json.loads(raw[8:8 + length]).get("__metadata__", {})
    state = json.loads(metadata.get("state", "{}"))
    return state, read_safetensors(path)


def nccl_said(output):
    """NCCL's own words in a failed job's log (its WARN lines, or the rank's NCCL error)."""
    lines = [line for line in output.splitlines() if "NCCL" in line and ("WARN" in line or "error" in line.lower())]
    return " / ".join(lines[-4:])[:600]


def check_two_ranks(args, data, work):
    """Two ranks on one GPU (NCCL over sockets) against two CPU ranks, fp32."""
    details, passed = [], True
    # One step: the momentum buffer of the end-of-epoch checkpoint is the averaged gradient (plus weight decay
    # times the same initial weights on both devices).
    one = subset(data, os.path.join(work, "two-ranks-data-one-step"), per_class=6)  # 60 images: one step of 64
    twelve = subset(data, os.path.join(work, "two-ranks-data-twelve-steps"), per_class=76)  # 760: twelve steps
    runs = {}
    for name, folder in (("one-step", one), ("twelve-steps", twelve)):
        for device in dict.fromkeys((args.device, "cpu")):  # once when the CPU stands in for the GPU
            runs[name, device] = run_two_ranks(args, folder, work, name, device)
    for (name, device), (code, output, _, _) in runs.items():
        if code != 0:
            passed = False
            said = nccl_said(output) if device == "cuda" else ""
            details.append(f"{name} on {device}: exit {code}" + (f"; NCCL: {said}" if said else "") +
                           " | log tail: " + " / ".join(output.splitlines()[-3:]))
    if not passed:
        return report(f"two ranks on one {args.device} (NCCL socket transport) against two CPU ranks, fp32", False,
                      "; ".join(details))
    # The same samples on each rank, step by step.
    for name in ("one-step", "twelve-steps"):
        gpu_logs, cpu_logs = runs[name, args.device][3], runs[name, "cpu"][3]
        same = all(gpu_logs[r] is not None and gpu_logs[r] == cpu_logs[r] for r in (0, 1))
        passed &= same
        details.append(f"{name}: samples per rank {'identical' if same else 'DIFFER'}")
    # The averaged gradient of the first step.
    (gpu_state, gpu_tensors), (cpu_state, cpu_tensors) = checkpoint_of(runs["one-step", args.device][2]), checkpoint_of(
        runs["one-step", "cpu"][2])
    names = sorted(n for n in (cpu_tensors or {}) if n.startswith("optimizer.momentum."))
    if not names or gpu_tensors is None or gpu_state.get("step") != 1 or cpu_state.get("step") != 1:
        passed = False
        details.append("one-step: no checkpoint with momentum buffers after exactly one step")
    else:
        worst = max(relative_l2(gpu_tensors[n], cpu_tensors[n]) for n in names)
        ok = worst <= 1e-3
        passed &= ok
        details.append(f"first step's averaged gradient (momentum, {len(names)} tensors): worst rel L2 {worst:.1e} "
                       f"(<= 1e-3)")
    # Twelve steps: losses, checkpoint, timing lines.
    gpu_out, cpu_out = runs["twelve-steps", args.device][1], runs["twelve-steps", "cpu"][1]
    losses = [dict(re.findall(r"step=(\d+) epoch=\d+ loss=([0-9.]+)", text)) for text in (gpu_out, cpu_out)]
    steps = sorted(set(losses[0]) & set(losses[1]), key=int)
    worst_loss = max((abs(float(losses[0][k]) - float(losses[1][k])) / float(losses[1][k]) for k in steps), default=1)
    ok = len(steps) >= 5 and worst_loss <= 1e-3
    passed &= ok
    details.append(f"losses at {len(steps)} log lines: worst rel diff {worst_loss:.1e} (<= 1e-3)")
    (gpu_state, gpu_tensors), (cpu_state, cpu_tensors) = (checkpoint_of(runs["twelve-steps", args.device][2]),
                                                          checkpoint_of(runs["twelve-steps", "cpu"][2]))
    if gpu_state is None or cpu_state is None:
        passed = False
        details.append("twelve-steps: a checkpoint is missing")
    else:
        keys = ("step", "epoch", "step_in_epoch", "world_size")
        same_state = all(gpu_state.get(k) == cpu_state.get(k) for k in keys)
        weights = [n for n in cpu_tensors if not n.startswith("optimizer.") and cpu_tensors[n].dtype.kind == "f"]
        worst = max(relative_l2(gpu_tensors[n], cpu_tensors[n]) for n in weights)
        ok = same_state and sorted(gpu_tensors) == sorted(cpu_tensors) and worst <= 1e-2
        passed &= ok
        details.append(f"checkpoint: state {'equal' if same_state else 'DIFFERS'} (step {gpu_state.get('step')}), "
                       f"{len(gpu_tensors)} tensors, weights worst rel L2 {worst:.1e} (<= 1e-2)")
    timing = re.findall(r"timing step=\d+ .*reduction_wait max=([0-9.]+) \(rank (\d) on [^)]*\) min=([0-9.]+) "
                        r"\(rank (\d)", gpu_out)
    ranks_named = {rank for line in timing for rank in (line[1], line[3])}
    waited = any(float(line[0]) > 0 for line in timing)
    ok = len(timing) >= 5 and ranks_named == {"0", "1"} and waited
    passed &= ok
    details.append(f"{len(timing)} timing lines naming ranks {sorted(ranks_named)}, reduction wait measured "
                   f"{'> 0' if waited else 'ZERO'}")
    return report(f"two ranks on one {args.device} (NCCL socket transport) against two CPU ranks, fp32", passed,
                  "; ".join(details))


CHECKS = ("accuracy", "resume", "across", "torchvision", "fast", "two-ranks", "timeline")
def check_timeline(args, data, work, ranks):
    """A GPU job's timeline: the device's own tracks, buckets under backward, a summary that adds up."""
    name = f"timeline of a {ranks}-rank job on the {args.device} (steps 11-20)"
    base = os.path.join(work, f"timeline-{ranks}")
    make_job(base, data, dict(JOB, device=args.device, processes_per_host=str(ranks), max_steps="30",
                              timeline_steps="11-20"))
    code, output = run_train(args.train, base, os.path.join(work, f"timeline-{ranks}.log"),
                             env={"TRAIN_RANKS_SHARE_GPUS": "1"})
    if code != 0:
        return report(name, False, f"exit {code}: " + " / ".join(output.splitlines()[-5:]))
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--train", default=os.path.join(ROOT, "build", "train"))
    parser.add_argument("--infer", default=os.path.join(ROOT, "build", "tests", "gpu", "gpu_infer"))
    parser.add_argument("--work", default=None)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="the device under test")
    parser.add_argument("--checks", default=",".join(CHECKS), help="comma-separated: " + ", ".join(CHECKS))
    parser.add_argument("--epochs", type=int, default=4, help="of the accuracy job (and the jobs resumed from it)")
    parser.add_argument("--fast-steps", type=int, default=60, help="steps of each fast-path job")
    args = parser.parse_args()
    checks = [c for c in args.checks.split(",") if c]
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        parser.error(f"unknown checks {unknown}; choose from {', '.join(CHECKS)}")
    JOB["epochs"] = str(args.epochs)
    work = args.work or tempfile.mkdtemp(prefix="gpu-training-check-")
    os.makedirs(work, exist_ok=True)
    data = args.data
    if data.endswith((".tgz", ".tar.gz")):
        with tarfile.open(data) as archive:
            archive.extractall(os.path.join(work, "data"))
        roots = [os.path.join(work, "data", d) for d in os.listdir(os.path.join(work, "data"))]
        data = roots[0] if len(roots) == 1 and os.path.isdir(os.path.join(roots[0], "train")) else os.path.join(work, "data")
    data = os.path.abspath(data)
    results, reference = [], None
    if "accuracy" in checks:
        accurate, reference = check_accuracy(args, data, work)
        results.append(accurate)
    elif {"resume", "torchvision"} & set(checks):
        # They compare with the uninterrupted GPU run: make it.
        reference = os.path.join(work, f"fashion-{args.device}")
        make_job(reference, data, dict(JOB, device=args.device))
        run_train(args.train, reference, os.path.join(work, f"fashion-{args.device}.log"))
    if "resume" in checks:
        results.append(check_resume(args, data, work, reference))
    if "across" in checks:
        results.append(check_across_devices(args, data, work))
    if "torchvision" in checks:
        try:
            results.append(check_torchvision(args, work, reference))
        except Exception as error:  # noqa: BLE001 - a missing PyTorch or file is a failed check, reported
            results.append(report("the GPU model file in torchvision: logits equal to train's GPU inference", False,
                                  repr(error)[:300]))
    if "fast" in checks:
        results.append(check_fast_path(args, data, work))
    if "two-ranks" in checks:
        results.append(check_two_ranks(args, data, work))
    if "timeline" in checks:
        for ranks in (1, 2):
            results.append(check_timeline(args, data, work, ranks))
    print(f"logs and jobs: {work}", flush=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
