#!/usr/bin/python3
"""Seconds from the start of `train` on every host to the first training step, on simulated hosts.

Brings up N hosts with scripts/simcluster.py (network namespaces, a real sshd each), starts `train` on all
of them at once as a container would, and times the master's log lines: sshd up, every peer answering,
mpirun started, every rank up (the allreduce check), the first step. It also prints the phases `train` logs
itself (docs/metrics.md, "Start-up phases"): the master launcher's (its sshd, the registration, the sshd
probes of the other hosts, mpirun's start, mpirun's launch of every host's daemon and the ranks) and the
slowest rank's (launch, MPI_Init, job checks, data index, model, communicator, first batch, first step).
Repeats and prints each run and the median. Needs root. A figure, not a test.

  sudo /usr/bin/python3 scripts/bench/multihost_start_bench.py [--hosts 3] [--runs 5] [--train build/train]
      [--processes-per-host 2] [--batch] [--baseline-train OTHER/build/train]

--hosts 2,4,8,16 measures each count in turn (one rank per host unless --processes-per-host says otherwise)
and prints the curve of the time to the first step against the number of hosts, with how busy the machine's
CPU was until then and its CPU seconds per simulated host (all N hosts share this machine's cores: near 100%
busy, their own work, which real hosts do side by side, sets the time). --batch starts the hosts as
an AWS Batch multi-node job (the children register with the main node). --baseline-train measures another
build (the previous one) in the same runs, alternating with this one, for the milestones it logs.
"""
import argparse
import json
import math
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
LAUNCH_PHASES = ["sshd", "registration", "sshd_probes", "mpirun_start", "ranks_up"]
LAUNCH_ROWS = {"sshd": "launcher: its sshd answering", "registration": "launcher: registration (Batch)",
               "sshd_probes": "launcher: sshd probes of the peers", "mpirun_start": "launcher: mpirun started",
               "ranks_up": "launcher: mpirun's daemons + ranks up"}
RANK_PHASES = ["launch", "mpi_init", "job_checks", "data_index", "model", "communicator", "first_batch", "first_step"]
LAUNCHER_LINE = re.compile(r"launcher: ranks up ([\d.]+) s after train started on \S+:"
                           + "".join(rf" {name}=([\d.]+)" for name in LAUNCH_PHASES))
STARTUP_LINE = re.compile(r"startup: first step ([\d.]+) s after train started on its host \(slowest: rank \d+ on \S+\):"
                          + "".join(rf" {name}=([\d.]+)" for name in RANK_PHASES))


def phases_of(text):
    """The master launcher's and the slowest rank's phases as {row: seconds} (empty for a build without them)."""
    phases = {}
    if match := LAUNCHER_LINE.search(text):
        for name, value in zip(LAUNCH_PHASES, match.groups()[1:]):
            phases[LAUNCH_ROWS[name]] = float(value)
    if match := STARTUP_LINE.search(text):
        for name, value in zip(RANK_PHASES, match.groups()[1:]):
            phases[f"rank: {name}"] = float(value)
        phases["rank: first step after train's start"] = float(match.group(1))
    return phases


def start_environment(cluster, host, batch):
    return {"HOSTNAME": host, **(simcluster.batch_environment(cluster, host) if batch else {})}


def write_job(cluster, hyperparameters, batch):
    encoded = simcluster.sdk_encoded_hyperparameters(hyperparameters)
    if not batch:
        simcluster.write_sagemaker_job(cluster, encoded)
        return
    for host in cluster.hosts:  # AWS Batch: no resource config, the hyperparameters alone
        config = os.path.join(cluster.opt_ml(host), "input", "config")
        os.makedirs(config, exist_ok=True)
        simcluster.write_file(os.path.join(config, "hyperparameters.json"), json.dumps(encoded))


def cpu_times():
    """(busy, all) jiffies of the whole machine, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


# The machine's CPU from starting train on every host to the first step: how busy it was, and its CPU seconds
# per simulated host. Near 100% busy, the simulated hosts' own work (which real hosts do side by side) sets the
# time, not a wait of the launch.
CPU_BUSY = "machine's CPU busy until the first step (%)"
CPU_PER_HOST = "CPU seconds per host until the first step"


def one_run(hosts, train, workdir, hyperparameters, batch):
    with simcluster.SimCluster(hosts, workdir) as cluster:
        write_job(cluster, hyperparameters, batch)
        master_log = os.path.join(cluster.host_dir(cluster.hosts[0]), "train.log")
        seen = {}
        processes = []
        start = time.monotonic()
        cpu_start = cpu_times()
        for host in cluster.hosts:
            with open(os.path.join(cluster.host_dir(host), "train.log"), "wb") as log:
                processes.append(cluster.popen(host, [train] + ([] if batch else ["train"]),
                                               env=start_environment(cluster, host, batch),
                                               stdout=log, stderr=subprocess.STDOUT))
        text = ""
        while len(seen) < len(MILESTONES) and time.monotonic() - start < 300:
            with open(master_log, errors="replace") as f:
                text = f.read()
            for name, pattern in MILESTONES:
                if name not in seen and re.search(pattern, text):
                    seen[name] = time.monotonic() - start
                    if name == MILESTONES[-1][0]:
                        busy, total = (now - then for now, then in zip(cpu_times(), cpu_start))
                        seen[CPU_BUSY] = 100.0 * busy / max(total, 1)
                        seen[CPU_PER_HOST] = busy / os.sysconf("SC_CLK_TCK") / hosts
            if any(p.poll() not in (None, 0) for p in processes):
                raise SystemExit(f"a host failed; see {cluster.workdir}:\n{text[-3000:]}")
            time.sleep(0.02)
        for process in processes[:1] if batch else processes:  # Batch: the job ends with the main node
            process.wait(timeout=120)
        with open(master_log, errors="replace") as f:
            seen.update(phases_of(f.read()))
        return seen


def load():
    return os.getloadavg()[0]


def print_table(title, results, rows):
    print(title)
    for name in rows:
        values = [r[name] for r in results if name in r]
        unit = "" if name == CPU_BUSY else " s"
        print(f"  {name:42s} {statistics.median(values):6.2f}{unit}" if values else f"  {name:42s} (not logged)")


def measure(hosts, builds, runs, workdir, hyperparameters, batch):
    """{build label: [one dict per run]}, the builds alternating within each run."""
    results = {label: [] for label, _ in builds}
    for run in range(runs):
        for label, train in builds:
            before = load()
            seen = one_run(hosts, train, os.path.join(workdir, f"h{hosts}-{label.replace(' ', '-')}-run{run}"), hyperparameters, batch)
            results[label].append(seen)
            shown = ", ".join(f"{name} {seen[name]:.2f} s" for name, _ in MILESTONES if name in seen)
            print(f"{hosts} hosts, {label}, run {run + 1}: {shown} (load {before:.2f})", flush=True)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="3", help="a number of hosts, or several: 2,4,8,16 (the curve)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--train", default=os.path.join(REPO, "build", "train"))
    parser.add_argument("--processes-per-host", type=int,
                        help="ranks per host (default 2 for one count of hosts, 1 for a curve)")
    parser.add_argument("--batch", action="store_true", help="start the hosts as an AWS Batch multi-node job")
    parser.add_argument("--baseline-train", help="another build's train, measured in the same runs")
    args = parser.parse_args()
    counts = [int(n) for n in args.hosts.split(",")]
    per_host = args.processes_per_host or (2 if len(counts) == 1 else 1)
    hyperparameters = dict(HYPERPARAMETERS, processes_per_host=per_host)
    builds = [("this build", os.path.abspath(args.train))]
    if args.baseline_train:
        builds.append(("baseline", os.path.abspath(args.baseline_train)))
    rows = [name for name, _ in MILESTONES] + [CPU_BUSY, CPU_PER_HOST] + list(LAUNCH_ROWS.values()) + \
        [f"rank: {name}" for name in RANK_PHASES] + ["rank: first step after train's start"]
    curve = {}
    with tempfile.TemporaryDirectory(prefix="bench-multihost-") as workdir:
        for hosts in counts:
            results = measure(hosts, builds, args.runs, workdir, hyperparameters, args.batch)
            for label, runs in results.items():
                print_table(f"{hosts} simulated hosts x {per_host} rank(s){' (AWS Batch)' if args.batch else ''}, "
                            f"{label}: seconds from starting train on every host (median of {args.runs}; "
                            f"load now {load():.2f}):", runs, rows)
                curve[(hosts, label)] = runs
    if len(counts) > 1:
        print(f"time to the first step against the number of hosts ({per_host} rank(s) each, median of {args.runs}):")
        print(f"  {'hosts':>5s} {'build':12s} {'ranks up':>9s} {'first step':>11s} {'after ranks up':>15s} "
              f"{'probes':>7s} {'daemons+ranks':>14s} {'registration':>13s} {'/ log2 N':>9s} {'CPU busy':>9s} "
              f"{'CPU s/host':>11s}")
        for (hosts, label), runs in curve.items():
            def median(name):
                values = [r[name] for r in runs if name in r]
                return statistics.median(values) if values else float("nan")
            up, first = median(MILESTONES[2][0]), median(MILESTONES[3][0])
            print(f"  {hosts:5d} {label:12s} {up:9.2f} {first:11.2f} {first - up:15.2f} "
                  f"{median(LAUNCH_ROWS['sshd_probes']):7.2f} {median(LAUNCH_ROWS['ranks_up']):14.2f} "
                  f"{median(LAUNCH_ROWS['registration']):13.2f} {first / math.log2(hosts):9.2f} "
                  f"{median(CPU_BUSY):8.0f}% {median(CPU_PER_HOST):11.2f}")


if __name__ == "__main__":
    main()
