#!/usr/bin/python3
"""Seconds from the start of `train` on every host to the first training step, on simulated hosts.

Brings up N hosts with scripts/simcluster.py (network namespaces, a real sshd each), starts `train` on all
of them at once as a container would, and times the master's log lines: sshd up, every peer answering,
mpirun started, every rank up (the allreduce check), the first step. Repeats and prints each run and the
median. Needs root. A figure, not a test.

  sudo /usr/bin/python3 scripts/bench/multihost_start_bench.py [--hosts 3] [--runs 3] [--train build/train]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import simcluster  # noqa: E402

# The smallest real job: one step of ResNet-18 on small synthetic images, so the figure is the launch's.
HYPERPARAMETERS = {"num_layers": 18, "image_shape": "3,32,32", "data_format": "synthetic", "num_classes": 10,
                   "mini_batch_size": 4, "processes_per_host": 2, "max_steps": 1}
MILESTONES = [("sshd answering on the master", r"\[train\] master: waiting up to"),
              ("every peer's sshd answering", r"\[train\] starting \d+ ranks"),
              ("every rank up (allreduce check)", r"allreduce check passed"),
              ("first training step", r"step=1 ")]


def one_run(hosts, train, workdir):
    with simcluster.SimCluster(hosts, workdir) as cluster:
        simcluster.write_sagemaker_job(cluster, simcluster.sdk_encoded_hyperparameters(HYPERPARAMETERS))
        master_log = os.path.join(cluster.host_dir(cluster.hosts[0]), "train.log")
        seen = {}
        processes = []
        start = time.monotonic()
        for host in cluster.hosts:
            with open(os.path.join(cluster.host_dir(host), "train.log"), "wb") as log:
                processes.append(cluster.popen(host, [train, "train"], stdout=log, stderr=subprocess.STDOUT))
        while len(seen) < len(MILESTONES) and time.monotonic() - start < 300:
            with open(master_log, errors="replace") as f:
                text = f.read()
            for name, pattern in MILESTONES:
                if name not in seen and re.search(pattern, text):
                    seen[name] = time.monotonic() - start
            if any(p.poll() not in (None, 0) for p in processes):
                raise SystemExit(f"a host failed; see {cluster.workdir}:\n{text[-3000:]}")
            time.sleep(0.02)
        for process in processes:
            process.wait(timeout=120)
        return seen


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--train", default=os.path.join(REPO, "build", "train"))
    args = parser.parse_args()
    train = os.path.abspath(args.train)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-multihost-") as workdir:
        for run in range(args.runs):
            seen = one_run(args.hosts, train, os.path.join(workdir, f"run{run}"))
            results.append(seen)
            print(f"run {run + 1}: " + ", ".join(f"{name} {seen.get(name, float('nan')):.2f} s"
                                                  for name, _ in MILESTONES), flush=True)
    print(f"{args.hosts} simulated hosts, seconds from starting train on every host (median of {args.runs}):")
    for name, _ in MILESTONES:
        values = [r[name] for r in results if name in r]
        print(f"  {name:34s} {statistics.median(values):6.2f} s" if values else f"  {name:34s} (not reached)")


if __name__ == "__main__":
    main()
