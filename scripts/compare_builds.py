#!/usr/bin/env python3
"""Trains the same jobs with two `train` binaries and compares the model files they write, byte for byte.

    /usr/bin/python3 scripts/compare_builds.py OLD_TRAIN NEW_TRAIN [--limit N] [--work DIR]

For a change that must not change training (a refactor): build the commit before it beside this one (e.g.
`git worktree add /tmp/old REV && cmake -S /tmp/old -B /tmp/old/build-cpu -DTRAIN_CUDA=OFF
-DBUILD_TESTING=OFF && cmake --build /tmp/old/build-cpu --target train`) and run both here. OpenBLAS picks
its kernels by CPU model, so digests are comparable only between builds run on one machine; that is why this
compares two binaries rather than a stored digest.

The jobs (Fashion-MNIST from Debian's dataset-fashion-mnist, converted by the scripts beside this one):
  file:  ResNet-18 at 28x28, NAG, cosine decay after warm-up, label smoothing, crop augmentation, 2 ranks,
         2 epochs, a validation channel, a checkpoint every epoch;
  pipe:  ResNet-18 at 28x28, SGD, step decay, the training channel streamed as TFRecord through Pipe-mode
         FIFOs, 2 ranks, 2 epochs.
Prints each job's SHA-256 of model.safetensors and of its last checkpoint for both binaries, and the last step
line; exits 0 when every pair is equal, 1 when any differs, 2 when a job fails.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from pipe_feeder import PipeFeeder  # noqa: E402

FILE_JOB = {"num_layers": "18", "image_shape": "3,28,28", "mini_batch_size": "32", "processes_per_host": "2",
            "epochs": "2", "learning_rate": "0.2", "warmup_epochs": "0.5", "lr_scheduler": "cosine",
            "optimizer": "nag", "label_smoothing": "0.1", "augmentation_type": "crop", "seed": "7",
            "device": "cpu"}
PIPE_JOB = {"num_layers": "18", "image_shape": "3,28,28", "mini_batch_size": "32", "processes_per_host": "2",
            "epochs": "2", "learning_rate": "0.1", "lr_scheduler": "step", "lr_scheduler_step": "1",
            "optimizer": "sgd", "augmentation_type": "none", "seed": "3", "num_classes": "10", "device": "cpu"}


def make_data(work, limit):
    folder = os.path.join(work, "fashion")
    records = os.path.join(work, "records")
    if not os.path.isdir(folder):
        subprocess.run([sys.executable, os.path.join(HERE, "data", "make_fashion_mnist_folder.py"), "--limit", str(limit),
                        folder], check=True, stdout=subprocess.DEVNULL)
    if not os.path.isdir(records):
        subprocess.run([sys.executable, os.path.join(HERE, "data", "make_dataset_records.py"), "--limit", str(limit),
                        records], check=True, stdout=subprocess.DEVNULL)
    return folder, records


def run_job(binary, base, hyperparameters, channels, pipe_objects=None):
    """Runs one job under SAGEMAKER_BASE_DIR=base; returns the SHA-256 of its model.safetensors and of its
    last checkpoint (model, momentum and position), and its last step line.
    channels: name -> (TrainingInputMode, data folder or None). pipe_objects: streamed as the Pipe-mode
    `train` channel, one FIFO per epoch."""
    shutil.rmtree(base, ignore_errors=True)
    config = os.path.join(base, "input", "config")
    data = os.path.join(base, "input", "data")
    os.makedirs(config)
    os.makedirs(data)
    with open(os.path.join(config, "hyperparameters.json"), "w") as f:
        json.dump(hyperparameters, f)
    with open(os.path.join(config, "inputdataconfig.json"), "w") as f:
        json.dump({name: {"TrainingInputMode": mode} for name, (mode, _) in channels.items()}, f)
    for name, (_, source) in channels.items():
        if source is not None:
            os.symlink(source, os.path.join(data, name))
    feeder = None
    if pipe_objects is not None:
        feeder = PipeFeeder(data, "train", pipe_objects, epochs=int(hyperparameters["epochs"]))
        feeder.start()
    environment = dict(os.environ, SAGEMAKER_BASE_DIR=base, OMP_NUM_THREADS="1")
    try:
        result = subprocess.run([binary], env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, timeout=1800)
    finally:
        if feeder is not None:
            feeder.stop()
            feeder.join(60)
    model = os.path.join(base, "model", "model.safetensors")
    if result.returncode != 0 or not os.path.exists(model):
        sys.stderr.write(result.stdout[-4000:])
        raise RuntimeError(f"{binary} exited {result.returncode} in {base}")
    digests = []
    for path in (model, os.path.join(base, "checkpoints", "checkpoint.safetensors")):
        with open(path, "rb") as f:
            digests.append(hashlib.sha256(f.read()).hexdigest())
    steps = [line for line in result.stdout.splitlines() if "step=" in line and "loss=" in line]
    return digests[0], digests[1], steps[-1].split("] ")[-1] if steps else "(no step line)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--limit", type=int, default=640, help="images of each split (default 640)")
    parser.add_argument("--work", default=None, help="scratch folder (default: a new temporary one)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="compare-builds-")
    folder, records = make_data(work, args.limit)
    train_records = os.path.join(records, "tfrecord", "train")
    tfrecords = sorted(os.path.join(train_records, name) for name in os.listdir(train_records))
    jobs = {
        "file": (FILE_JOB, {"train": ("File", os.path.join(folder, "train")),
                            "validation": ("File", os.path.join(folder, "validation"))}, None),
        "pipe": (dict(PIPE_JOB, num_training_samples=str(args.limit)), {"train": ("Pipe", None)}, tfrecords),
    }
    different = False
    for name, (hyperparameters, channels, pipe_objects) in jobs.items():
        digests = []
        for label, binary in (("old", args.old), ("new", args.new)):
            try:
                digests.append(run_job(binary, os.path.join(work, f"{name}-{label}"), hyperparameters, channels,
                                       pipe_objects))
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                print(f"{name}: {error}")
                return 2
        for what, index in (("model.safetensors", 0), ("checkpoint", 1)):
            same = digests[0][index] == digests[1][index]
            different |= not same
            print(f"{name} job, {what}: old {digests[0][index]}  new {digests[1][index]}  "
                  f"{'same bytes' if same else 'DIFFERENT'}")
        print(f"{name} job, last step: old {digests[0][2]}\n{' ' * len(name)}           new {digests[1][2]}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
