#!/usr/bin/python3
"""Seconds from the start of `train` to its data index and to the first step, at ImageNet's size.

Runs a 1-step job (ResNet-18 on 32x32 inputs, 2 ranks on this host, File mode, FullyReplicated) on each data
set that scripts/data/make_imagenet_sized.py wrote (an image folder of 1,281,167 tiny JPEGs in 1,000 classes,
1,024 TFRecord shards, one RecordIO file with and without its .idx), stamps every line of its output as it
arrives, and prints per run: the time from start to the index built (rank 0's "training channel indexed"
line), the indexing itself (that line's own figure), from the index's start to the first step, to the end
of the job, the job's CPU time (every process's user + system: less sensitive to other load than the wall
time), and the index's memory per rank (its own byte count from its containers' capacities, and how much
rank 0's resident memory grew while indexing). Then the median of each. With --baseline, another build
(one from before the index was timed has no "indexed" line: only its first step, job and CPU time) runs
alternately with this one, so that both meet the same load. With --hosts N (root) the job runs on N
simulated hosts (scripts/simcluster.py) x 2 ranks, the data set bound on every host as a FullyReplicated
channel (each host's own mount of the same files, as on a shared file system), timed from the master's log.
A figure, not a test: no assertions. The page cache is warm after the first run of a data set; the load
(uptime) is printed.

  build-python/bin/python scripts/data/make_imagenet_sized.py /tmp/imagenet-sized
  /usr/bin/python3 scripts/bench/index_bench.py [--data /tmp/imagenet-sized] [--runs 3] [--train build/train]
      [--sets folder,tfrecord,recordio,recordio_noidx] [--baseline OTHER_BUILD/train] [--hosts N]
"""
import argparse
import json
import os
import re
import resource
import sys
import statistics
import subprocess
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import simcluster  # noqa: E402
SETS = {"folder": "image folder", "tfrecord": "1,024 TFRecord shards", "recordio": "RecordIO with .idx",
        "recordio_noidx": "RecordIO without .idx"}
HYPERPARAMETERS = {"num_layers": "18", "image_shape": "3,32,32", "num_classes": "1000", "mini_batch_size": "4",
                   "processes_per_host": "2", "max_steps": "1", "checkpoint_frequency": "0"}
INDEXED = re.compile(r"training channel indexed in ([\d.]+) s: (\d+) samples, index ([\d.]+) MB "
                     r"\(([\d.]+) bytes per sample(?:; resident memory grew ([-\d.]+) MB)?\)")
JOB_LIMIT = 600


def job_folder(work, data):
    base = os.path.join(work, "opt-ml")
    config = os.path.join(base, "input", "config")
    os.makedirs(config)
    os.makedirs(os.path.join(base, "input", "data"))
    os.symlink(data, os.path.join(base, "input", "data", "train"))
    for name, content in (("resourceconfig.json", {"current_host": "algo-1", "hosts": ["algo-1"]}),
                          ("hyperparameters.json", HYPERPARAMETERS),
                          ("inputdataconfig.json", {"train": {"TrainingInputMode": "File",
                                                              "S3DistributionType": "FullyReplicated"}})):
        with open(os.path.join(config, name), "w") as f:
            json.dump(content, f)
    return base


def start_on_one_host(work, train, data):
    base = job_folder(work, data)
    env = dict(os.environ, SAGEMAKER_BASE_DIR=base, OMP_NUM_THREADS="1")
    process = subprocess.Popen([train], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace")
    return process, []


def start_on_cluster(cluster, train, data):
    """The job on every host of `cluster`; the master's output piped, the others' to their host folders."""
    simcluster.clear_job(cluster)
    simcluster.write_sagemaker_job(cluster, HYPERPARAMETERS,
                                   {"train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"}})
    for host in cluster.hosts:
        simcluster.bind_data_channel(cluster, host, "train", data)
    env = {"OMP_NUM_THREADS": "1", "TRAIN_MASTER_LINGER_SECONDS": "1"}
    others = []
    for host in cluster.hosts[1:]:
        with open(os.path.join(cluster.host_dir(host), "train.log"), "wb") as log:
            others.append(cluster.popen(host, [train, "train"], env=env, stdout=log, stderr=subprocess.STDOUT))
    master = cluster.popen(cluster.hosts[0], [train, "train"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
    return master, others


def one_run(train, data, cluster=None):
    with tempfile.TemporaryDirectory(prefix="index-bench-") as work:
        lines = []
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        process, others = start_on_cluster(cluster, train, data) if cluster else start_on_one_host(work, train, data)

        def read():
            for line in process.stdout:
                lines.append((time.monotonic() - start, line.rstrip("\n")))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            code = process.wait(timeout=JOB_LIMIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        reader.join(30)
        for other in others:
            other.wait(timeout=JOB_LIMIT)
        end = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        text = "\n".join(line for _, line in lines)
        if code != 0:
            raise SystemExit(f"train failed ({code}) on {data}:\n{text[-4000:]}")
        run = {"job": end, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}
        for stamp, line in lines:
            found = INDEXED.search(line)
            if found and "indexed" not in run:
                run["indexed"] = stamp
                run["indexing"] = float(found.group(1))
                run["samples"] = int(found.group(2))
                run["bytes_per_sample"] = float(found.group(4))
                run["rss_growth_mb"] = float(found.group(5)) if found.group(5) else float("nan")
            if "step=1 " in line and "step" not in run:
                run["step"] = stamp
        if "step" not in run:
            raise SystemExit(f"no step line in the output of the run on {data}:\n{text[-4000:]}")
        if "indexed" in run:
            run["index_to_step"] = run["step"] - (run["indexed"] - run["indexing"])
        else:  # a build that does not time its index
            for key in ("indexed", "indexing", "index_to_step", "bytes_per_sample", "rss_growth_mb"):
                run[key] = float("nan")
            run["samples"] = 0
        return run


def row(name, run):
    return (f"{name:24s} start->indexed {run['indexed']:6.2f} s  indexing {run['indexing']:6.2f} s  "
            f"index start->step 1 {run['index_to_step']:6.2f} s  start->step 1 {run['step']:6.2f} s  "
            f"job {run['job']:6.2f} s  cpu {run['cpu']:6.2f} s  index {run['bytes_per_sample']:6.1f} B/sample  "
            f"rss +{run['rss_growth_mb']:.0f} MB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/imagenet-sized", help="make_imagenet_sized.py's output folder")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--train", default=os.path.join(REPO, "build", "train"))
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated subset of {', '.join(SETS)}")
    parser.add_argument("--baseline", help="another build's train, run alternately with --train on each data set")
    parser.add_argument("--hosts", type=int, default=1, help="simulated hosts (root), FullyReplicated (default 1)")
    args = parser.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    for name in sets:
        if name not in SETS:
            parser.error(f"--sets: unknown {name}; expected some of {', '.join(SETS)}")
        if not os.path.isdir(os.path.join(args.data, name)):
            parser.error(f"{os.path.join(args.data, name)} is missing; write it with "
                         f"scripts/data/make_imagenet_sized.py")
    print(f"train {args.train}, {args.hosts} host(s) x 2 ranks, ResNet-18 at 32x32, max_steps=1; "
          f"{os.cpu_count()} cores; load at start: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f}")
    builds = [("", os.path.abspath(args.train))] + ([("baseline ", os.path.abspath(args.baseline))]
                                                      if args.baseline else [])
    cluster = None
    if args.hosts > 1:
        cluster = simcluster.SimCluster(hosts=args.hosts)
        cluster.__enter__()
    try:
        measure(args, sets, builds, cluster)
    finally:
        if cluster:
            cluster.__exit__(None, None, None)


def measure(args, sets, builds, cluster):
    for name in sets:
        runs = {label: [] for label, _ in builds}
        for i in range(args.runs):
            for label, train in builds:
                run = one_run(train, os.path.join(args.data, name), cluster)
                runs[label].append(run)
                print(row(f"{label}{name} run {i + 1}", run) + f"  (load {os.getloadavg()[0]:.2f})", flush=True)
        for label, _ in builds:
            done = runs[label]
            median = {key: statistics.median(run[key] for run in done) for key in done[0]}
            print(row(f"{label}{name} median of {len(done)}", median) +
                  f"  ({max(run['samples'] for run in done)} samples, {SETS[name]})", flush=True)


if __name__ == "__main__":
    main()
