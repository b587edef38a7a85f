#!/usr/bin/env python3
"""The GPU checks in two groups, each one command within 360 s on one H100 or H200 (16 cores): run by
scripts/gpu/gpu_check.sh (which picks a Python with numpy, and PyTorch where there is one). Standard library only.

    gpu_check.sh --list
    gpu_check.sh [--bundle DIR] [--data FASHION] [--references DIR] [--work DIR] [--only KEYS] [--dry-run]
                 GROUP LOGDIR

  GROUP         proof: the trainer on the GPU, most valuable first (the libraries and the GPU; the whole training
                step against the CPU model; train device=cuda on Fashion-MNIST against the CPU's top-1, the mean
                of a few seeds on each side; two ranks on one GPU against two CPU ranks; SIGTERM and restart
                bit-identical, the model file in torchvision; ResNet-50 img/s at batch 256 beside PyTorch eager);
                rest: every op against the CPU reference, NCCL buckets with 1-3 ranks, the timeline of a 1- and a
                2-rank job, TRAIN_SHARED_GRADIENT_BUFFERS=1 byte for byte, compute-sanitizer memcheck/racecheck/synccheck,
                ResNet-50 img/s at batch 64/128/256 beside torch.compile
  LOGDIR        the group's record: table.md (rewritten the moment any check starts or ends, so a command
                killed at its limit leaves every finished row), machine.log (nvidia-smi, the driver, the
                libraries and their versions, PyTorch), each check's log, jobs/ (the train jobs' logs)
  --bundle DIR  the programs, Fashion-MNIST and the CPU's references of a bundle (scripts/gpu/make_gpu_bundle.sh)
                on a machine that cannot build the project; without it, this checkout's build/ (then --data and
                --references are needed by the training checks)
  --data        a Fashion-MNIST image folder or .tgz of one (default: the bundle's fashion.tgz)
  --references  a folder with references.json (default: the bundle's references/)
  --work DIR    where the jobs run (default /tmp/gpu-check/GROUP; emptied first): not LOGDIR, whose files come
                back from a lent machine
  --only KEYS   only these checks (comma-separated keys, as --dry-run lists them) and those they wait for
  --dry-run     print the group's checks: each one's budget, estimate, what it waits for, its worst-case window
                and command; run nothing (no GPU needed)

Each check has a budget: one still running when its budget is spent is stopped (its process tree) and its row
says so. Checks that do not time each other run at the same time on the one GPU; a timed one (`alone`) runs
with nothing else running. The worst case (every check taking its whole budget) must fit in 360 s, or the group
is refused (exit 64); tests/gpu/test_gpu_check_script.sh checks the same sum in CI. Rows are PASS, FAIL or INFO.
Exit status: 0 when no row failed; 1 when one did; 2 when no GPU is visible; 64 for usage errors.
"""
import argparse
import datetime
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from gpu_training_check import ACCURACY_SEEDS  # noqa: E402 - how many jobs the accuracy check runs
LIMIT = 360  # seconds a group may take, worst case: a lent machine's command runs it with time to spare
GROUPS = {
    "proof": "the trainer on the GPU: libraries, the whole step, accuracy, two ranks, resume, torchvision, img/s",
    "rest": "every op, NCCL buckets 1-3 ranks, timelines, the fast path, compute-sanitizer, torch.compile img/s",
}
SANITIZER_REFUSED = re.compile(r"Device not supported|LibraryNotLoaded|device is not supported|not supported on "
                               r"this (device|GPU|platform)|Unable to find injection library", re.IGNORECASE)
# Kernels and host code of NVIDIA's closed libraries (cuDNN's and cuBLAS's precompiled kernels, NCCL): what the
# sanitizer reports inside them is named in the row, not held against our code. Seen on an H200 (2026-11-27): one
# racecheck hazard inside cuDNN's sm90_xmma_dgrad_implicit_gemm kernel (Hopper's warpgroup MMA kernels are known to
# draw racecheck reports: NVIDIA/compute-sanitizer-samples#19), and NCCL's start asking cudaFuncGetAttributes of
# kernels its build has no sm_90 image of (cudaErrorNoKernelImageForDevice, which NCCL handles).
LIBRARY_KERNEL = re.compile(r"_cudnn\b|\bcudnn|xmma|cutlass|\bnvjet|cublas|\bsm\d{2,3}a?_|\bnccl")
LIBRARY_FILE = re.compile(r"\bin lib(nccl|cudnn\w*|cublas\w*)\.so[.\d]*\s*$")
SANITIZER_ERROR_EXIT = 99  # compute-sanitizer's exit status when it reported anything
# What each program the sanitizer runs prints when it succeeded (its own exit status is hidden behind the
# sanitizer's when there are reports).
SANITIZED_PROGRAM_SUCCEEDED = {"step": r"gpu_step_check: (\d+) of \1 checks passed",
                               "train": r"all \d+ ranks? finished successfully"}


class Check:
    """One row (or a few) of a group's table: a command with a budget.

    after: the keys of the checks it waits for; alone: it is timed, so nothing else runs beside it (alone checks
    come last, one at a time); rows: "exit" (one row from the exit status), "lines" (the CHECK|name|verdict|detail
    lines it prints), "sanitizer" (exit status, INFO where the machine refuses the sanitizer); ready: the check ends
    when its process writes this file, and the process waits for the release check (release: its key) to time it;
    gate: when it fails, the checks that wait for it are not run (nothing can run without the libraries or data);
    needs: checks it reads the results of while they run beside it (--only keeps them).
    """

    def __init__(self, key, name, budget, estimate, command, after=(), alone=False, rows="exit", env=None,
                 ready=None, release=None, jobs=None, prepare=None, gate=False, needs=()):
        self.key, self.name, self.budget, self.estimate = key, name, budget, estimate
        self.command, self.after, self.alone, self.rows = command, tuple(after), alone, rows
        self.env, self.ready, self.release, self.jobs, self.prepare = env or {}, ready, release, jobs, prepare
        self.gate, self.needs = gate, tuple(needs)
        self.succeeded = None  # rows "sanitizer": what the program prints when it succeeded (a regex)
        self.state, self.results, self.process, self.started, self.ended = "waiting", [], None, None, None
        self.log = f"{key}.log"  # in LOGDIR


# ---- the plans ------------------------------------------------------------------------------------------------

class Programs:
    """How a program runs here: from the bundle (its run.sh finds CUDA's libraries) or from build/."""

    def __init__(self, bundle):
        self.bundle = bundle

    def __call__(self, name):
        if self.bundle:
            return ["bash", os.path.join(self.bundle, "run.sh"), name]
        return [{"mpirun": "mpirun", "compute-sanitizer": "compute-sanitizer"}.get(name) or self.built(name)]

    def built(self, name):
        return os.path.join(REPO, "build", {"train": "train", "gpu_step_bench": "scripts/bench/gpu_step_bench"}.get(
            name, f"tests/gpu/{name}"))

    def mpirun(self, ranks, program):
        """mpirun over `ranks` ranks of a program (on the bundle's PATH inside mpirun)."""
        options = ["--oversubscribe", "--bind-to", "none", "-np", str(ranks)]
        if self.bundle:
            return self("mpirun") + options + [program]
        return ["mpirun", "--allow-run-as-root"] + options + [self.built(program)]

    def inner(self, name):
        """A program as compute-sanitizer starts it: by name on the bundle's PATH, or its build path."""
        return [name] if self.bundle else [self.built(name)]


def machine_check(programs):
    return Check("machine", "the libraries found and the GPU named (run.sh --check)", 30,
                 "5-15 s: nvidia-smi (seconds when the driver is not kept loaded), the bundle unpacked (34 MiB), each "
                 "library found and asked its version, ldd of each program, PyTorch imported for its versions",
                 [sys.executable, os.path.abspath(__file__), "--machine", programs.bundle or "-"], rows="machine",
                 gate=True)


def describe_machine(bundle):
    """What a record of a GPU run says about the machine: nvidia-smi, the cores, where each library comes from and
    its version (run.sh --check), PyTorch's versions. Exit status: run.sh --check's (127: a library is missing)."""
    for command in (["nvidia-smi"], ["nproc"]):
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        print(result.stdout if command[0] == "nvidia-smi" else f"CPU cores: {result.stdout.strip()}", flush=True)
    runner = os.path.join(bundle, "run.sh") if bundle != "-" else os.path.join(HERE, "gpu_bundle_run.sh")
    code = subprocess.run(["bash", runner, "--check"], timeout=120).returncode
    try:
        import torch
        print(f"PyTorch: {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}) in "
              f"{sys.executable}")
    except ImportError as error:
        print(f"PyTorch: not importable by {sys.executable} ({error})")
    return code


def data_check(context):
    return Check("data", "Fashion-MNIST unpacked for the training checks (the bundle's fashion.tgz)", 20,
                 "3 s: 22,000 PNG files, 11 MiB", [sys.executable, os.path.abspath(__file__), "--unpack",
                                                   context.data, context.folder], gate=True)


def training(context, key, name, budget, estimate, checks, after=("machine", "data"), extra=(), needs=()):
    command = [sys.executable, os.path.join(HERE, "gpu_training_check.py"), "--data", context.folder,
               "--train", shlex.join(context.programs("train")), "--infer", shlex.join(context.programs("gpu_infer")),
               "--checks", checks, "--work", os.path.join(context.work, context.training_work.get(key, key))]
    if context.references:
        command += ["--references", context.references]
    return Check(key, name, budget, estimate, command + list(extra), after=after, rows="lines", needs=needs,
                 jobs=os.path.join(context.work, context.training_work.get(key, key)))


def proof_plan(context):
    p = context.programs
    bench = [sys.executable, os.path.join(REPO, "scripts", "bench", "gpu_step_bench.py"),
             "--ours", shlex.join(p("gpu_step_bench")), "--batches", "256", "--variants", "reference,fast",
             "--peers", "eager", "--json", os.path.join(context.logdir, "bench.json")]
    context.training_work = {"accuracy": "training", "resume": "training", "torchvision": "training"}
    seeds = len(ACCURACY_SEEDS)
    return [
        machine_check(p),
        data_check(context),
        Check("step", "the whole training step of ResNet-50 and ResNet-18 against the CPU model, fp32 and bf16 "
                      "(gpu_step_check)", 120,
              "30-60 s: 28 s alone on an H100 (2026-11-23), mostly its CPU fp32/fp64 reference of ResNet-50 at "
              "224x224 on the cores the training checks share", p("gpu_step_check"), after=("machine",)),
        training(context, "accuracy", f"train device=cuda, 1 rank, Fashion-MNIST (ResNet-18, 28x28, 2 epochs), "
                                      f"{seeds} seeds side by side: their mean validation top-1 within 2 points of "
                                      f"the CPU runs' mean", 150,
                 f"25-70 s: {seeds} jobs side by side, each: start (CUDA, cuDNN, NCCL) ~10 s, 188 steps of batch "
                 "128 at 28x28 (~5 ms each alone, launch bound; the GPU time-sliced between them), 2 validations of "
                 "10,000 images, 2 checkpoints", "accuracy"),
        training(context, "two-ranks", "2 ranks of train on the one GPU against 2 CPU ranks: the same samples, the "
                                       "first averaged gradient, twelve steps' losses", 120,
                 "20-40 s: a 1-step and a 12-step job side by side, each 2 ranks starting CUDA and NCCL's socket "
                 "transport (~10-15 s), fp32 steps of batch 64 at 28x28", "two-ranks"),
        training(context, "resume", "SIGTERM mid-epoch and restart: the same model.safetensors bytes as the "
                                    "uninterrupted GPU run", 160,
                 "35-70 s: the job to step 40 (~15 s), its checkpoint, the restart to the end (~20 s), then the "
                 "accuracy check's first seed (its uninterrupted job, side by side) waited for: a budget past the "
                 "accuracy check's", "resume", extra=["--after-accuracy"], needs=("accuracy",)),
        training(context, "torchvision", "the model file in torchvision: logits equal to train's GPU inference "
                                         "within bf16 tolerance", 45,
                 "10-20 s: PyTorch imported, gpu_infer (CUDA start) on 64 images, torchvision on the CPU",
                 "torchvision", after=("accuracy",), extra=["--after-accuracy"]),
        Check("bench", "the CUDA engine at batch 256, ResNet-50 224x224 bf16, beside PyTorch eager on the same GPU "
                       "(img/s, memory, ratio)", 100,
              "45-60 s: ours twice (reference and fast path: start ~8 s, 65 steps of ~57 ms), eager (PyTorch import, "
              "cudnn.benchmark's search ~15 s, 65 steps of ~65 ms)", bench, after=("machine",), alone=True,
              rows="lines"),
    ]


def sanitizer(context, key, tool, target, budget, estimate, after=("machine",), env=None):
    p = context.programs
    if target == "step":
        inner, name = p.inner("gpu_step_check") + ["--case", "resnet18 b8 32x32"], "the whole-step check, ResNet-18 " \
                                                                                     "batch 8 32x32, fp32 and bf16"
        extra = []
    else:
        inner, name = p.inner("train"), "a 5-step train job (device=cuda, ResNet-18 batch 32 28x28)"
        extra = ["--target-processes", "all"]
    command = p("compute-sanitizer") + ["--tool", tool, "--error-exitcode", str(SANITIZER_ERROR_EXIT),
                                        "--print-limit", "20"] + extra + inner
    check = Check(key, f"compute-sanitizer {tool}: {name}", budget, estimate, command, after=after, rows="sanitizer",
                  env=env)
    check.succeeded = SANITIZED_PROGRAM_SUCCEEDED[target]
    return check


def rest_plan(context):
    p = context.programs
    context.training_work = {}
    bench = [sys.executable, os.path.join(REPO, "scripts", "bench", "gpu_step_bench.py"),
             "--ours", shlex.join(p("gpu_step_bench"))]
    ours_json = os.path.join(context.logdir, "bench-ours.json")
    plan = [
        machine_check(p),
        data_check(context),
        Check("kernels", "every CUDA op against the CPU reference, fp32 and bf16 (gpu_kernel_check)", 90,
              "20-45 s (not timed before): 193 ops on ResNet-50 shapes at batch 4-8, each against its CPU "
              "reference", p("gpu_kernel_check"), after=("machine",)),
    ]
    for ranks in (1, 2, 3):
        plan.append(Check(f"nccl-{ranks}", f"NCCL gradient buckets, {ranks} rank(s) on the one GPU (gpu_nccl_check)",
                          60, f"{5 + 5 * ranks}-{10 + 10 * ranks} s: mpirun, NCCL's start over sockets, 5 thresholds "
                          "x fp32/bf16 reductions of ResNet-50's 25.6 M gradients", p.mpirun(ranks, "gpu_nccl_check"),
                          after=("machine",)))
    plan += [
        training(context, "timeline-1", "the timeline of a 1-rank GPU job (steps 11-20 of 30)", 60,
                 "15-30 s: one 30-step job", "timeline-1"),
        training(context, "timeline-2", "the timeline of a 2-rank GPU job on the one GPU (steps 11-20 of 30)", 90,
                 "20-40 s: one 30-step job of 2 ranks over NCCL's sockets", "timeline-2"),
        training(context, "fast", "TRAIN_SHARED_GRADIENT_BUFFERS=1 byte for byte: the same model.safetensors as "
                                  "the reference path", 90, "20-40 s: two 60-step jobs side by side", "fast"),
        sanitizer(context, "memcheck", "memcheck", "step", 180,
                  "60-120 s (not timed before): every kernel of 2 steps instrumented, the CPU reference as before"),
        sanitizer(context, "racecheck", "racecheck", "step", 180,
                  "60-150 s (not timed before): shared-memory accesses of every kernel tracked, the slowest tool"),
        sanitizer(context, "synccheck", "synccheck", "step", 180, "40-100 s (not timed before)"),
    ]
    job = sanitizer(context, "memcheck-train", "memcheck", "train", 180,
                    "60-120 s (not timed before): train's launcher, mpirun and the rank under the sanitizer, 5 steps",
                    after=("machine", "data"), env={"SAGEMAKER_BASE_DIR": os.path.join(context.work, "sanitized-job")})
    job.prepare = lambda: sanitized_job(context)  # once the data is unpacked
    plan.append(job)
    for batch in (64, 128, 256):
        ready, go = (os.path.join(context.work, f"compile-{batch}.{what}") for what in ("ready", "go"))
        plan.append(Check(f"compile-{batch}", f"torch.compile at batch {batch}: compiled and warm, waiting to be "
                                              "timed alone", 180,
                          "60-120 s (not timed before): Inductor compiles ResNet-50's forward and backward (cold "
                          "cache), 3 batch sizes side by side with the checks above",
                          bench + ["--variants", "none", "--peers", "compile", "--batches", str(batch),
                                   "--ready", ready, "--go", go, "--go-timeout", str(LIMIT), "--against", ours_json],
                          after=("machine",), ready=ready, rows="lines"))
    plan.append(Check("bench", "the CUDA engine at batch 64, 128 and 256 (reference and fast path), ResNet-50 "
                               "224x224 bf16", 90,
                      "40-60 s: 2 processes x 3 batch sizes, each 65 steps of 28-57 ms after the engine's start",
                      bench + ["--variants", "reference,fast", "--peers", "none", "--json", ours_json],
                      after=("machine",), alone=True, rows="lines"))
    for batch in (64, 128, 256):
        plan.append(Check(f"compile-{batch}-timed", f"torch.compile at batch {batch} beside the CUDA engine (img/s, "
                                                    "memory, ratio)", 15,
                          "3-6 s: 60 compiled steps of 20-45 ms", None, alone=True, rows="lines",
                          release=f"compile-{batch}"))
    return plan


PLANS = {"proof": proof_plan, "rest": rest_plan}


def sanitized_job(context):
    """The 5-step job compute-sanitizer runs train on."""
    import json
    base = os.path.join(context.work, "sanitized-job")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(os.path.join(base, "input", "config"))
    os.makedirs(os.path.join(base, "input", "data"))
    os.symlink(os.path.join(context.folder, "train"), os.path.join(base, "input", "data", "train"))
    with open(os.path.join(base, "input", "config", "hyperparameters.json"), "w") as f:
        json.dump({"num_layers": "18", "image_shape": "3,28,28", "mini_batch_size": "32", "max_steps": "5",
                   "device": "cuda", "augmentation_type": "none"}, f)
    with open(os.path.join(base, "input", "config", "inputdataconfig.json"), "w") as f:
        json.dump({"train": {"TrainingInputMode": "File"}}, f)


# ---- the worst case --------------------------------------------------------------------------------------------

def worst_case(plan):
    """{key: (start, end)} with every check taking its whole budget: a check starts when what it waits for has
    ended; an alone check when everything before it has."""
    window, keys = {}, {check.key for check in plan}
    for check in plan:
        missing = [key for key in check.after + ((check.release,) if check.release else ()) if key not in window]
        if missing:
            raise ValueError(f"check {check.key} waits for {missing}, which {'come later' if set(missing) <= keys else 'do not exist'}")
        start = max((window[key][1] for key in check.after), default=0)
        if check.alone:
            start = max((end for _, end in window.values()), default=0)
        window[check.key] = (start, start + check.budget)
    alone = [check.alone for check in plan]
    if True in alone and not all(alone[alone.index(True):]):
        raise ValueError("alone checks must come last (nothing may start beside or after them but other alone ones)")
    return window


def select(plan, only):
    """The checks named and, transitively, those they wait for or need (in plan order)."""
    by_key = {check.key: check for check in plan}
    unknown = [key for key in only if key not in by_key]
    if unknown:
        raise ValueError(f"no checks {unknown} in this group; its checks: {', '.join(by_key)}")
    wanted, pending = set(), list(only)
    while pending:
        key = pending.pop()
        if key not in wanted:
            wanted.add(key)
            pending += list(by_key[key].after + by_key[key].needs) + ([by_key[key].release] if by_key[key].release
                                                                     else [])
    return [check for check in plan if check.key in wanted]


def print_plan(group, plan, window):
    total = max(end for _, end in window.values())
    print(f"gpu_check.sh {group}: {len(plan)} checks, worst case {total} s of the {LIMIT} s a group may take "
          "(budget: the check is stopped when it is spent; estimate: what it should take on one H100/H200 with 16 "
          "cores)")
    for number, check in enumerate(plan, 1):
        start, end = window[check.key]
        waits = ",".join(check.after + ((check.release,) if check.release else ())) or "-"
        print(f"check {number} {check.key}: budget {check.budget} s, after {waits}, "
              f"{'alone' if check.alone else 'beside others'}, worst case {start}-{end} s; estimate {check.estimate}")
        print(f"    {check.name}")
        command = check.command if check.command else ["(touches", f"{check.release}'s go file, waits for its timing)"]
        environment = " ".join(f"{name}={value}" for name, value in check.env.items())
        print(f"    would run: {environment + ' ' if environment else ''}{shlex.join(command)}")
    print(f"total: {total} s (limit {LIMIT} s)")


# ---- running --------------------------------------------------------------------------------------------------

def descendants(pid):
    """Every process below `pid` (from /proc), deepest last."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def signal_tree(process, number):
    for pid in [process.pid] + descendants(process.pid):
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass
    try:
        os.killpg(process.pid, number)
    except ProcessLookupError:
        pass


def stop(process, grace=5):
    """SIGTERM to the process and everything below it, SIGKILL after `grace` s; reaped."""
    if process.poll() is not None:
        return
    signal_tree(process, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    signal_tree(process, signal.SIGKILL)
    process.wait(timeout=30)


class Group:
    def __init__(self, name, plan, context):
        self.name, self.plan, self.context = name, plan, context
        self.by_key = {check.key: check for check in plan}
        self.started = None
        self.window = worst_case(plan)

    # -- the table --
    def write_table(self):
        now = time.monotonic() - self.started
        ended = sum(check.state == "ended" for check in self.plan)
        lines = [f"# gpu_check.sh {self.name}: {ended} of {len(self.plan)} checks ended, {now:.0f} s "
                 f"(worst case {max(end for _, end in self.window.values())} s, limit {LIMIT} s)", "",
                 f"- started: {self.context.began}", f"- command: `{self.context.command}`",
                 f"- GPU: {self.context.gpu}", f"- bundle: {self.context.bundle_made}"]
        machine = os.path.join(self.context.logdir, "machine.log")
        if self.by_key.get("machine") and self.by_key["machine"].state == "ended" and os.path.exists(machine):
            lines += [f"- {line}" for line in machine_summary(machine)]
        lines += ["", "| # | check | result | detail | s | budget |", "|---|---|---|---|---|---|"]
        for number, check in enumerate(self.plan, 1):
            took = ("" if check.started is None else
                    f"{(check.ended or time.monotonic()) - check.started:.0f}")
            results = check.results or [(check.name, {"waiting": "not started", "running": "running"}.get(
                check.state, "?"), "")]
            for name, verdict, detail in results:
                cell = detail.replace("|", "/").replace("\n", " ")
                lines.append(f"| {number} | {name} | {verdict} | {cell} | {took} | {check.budget} |")
        path = os.path.join(self.context.logdir, "table.md")
        with open(path + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(path + ".tmp", path)

    # -- one check --
    def can_start(self, check):
        if any(self.by_key[key].state != "ended" for key in check.after if key in self.by_key):
            return False
        running = [c for c in self.plan if c.state == "running"]
        if check.alone:
            before = self.plan[:self.plan.index(check)]
            return not running and all(c.state == "ended" for c in before)
        return not any(c.alone for c in running)

    def start(self, check):
        check.started, check.state = time.monotonic(), "running"
        log = os.path.join(self.context.logdir, check.log)
        print(f"== {check.key}: started ({check.name}; budget {check.budget} s)", flush=True)
        if check.release:
            held = self.by_key[check.release]
            if held.process is None or held.process.poll() is not None or not held.results or \
                    held.results[0][1] == "FAIL":
                self.finish(check, [(check.name, "FAIL", f"not run: {check.release} did not get ready (its row)")])
                return
            check.process, check.log = held.process, held.log
            check.log_path = os.path.join(self.context.logdir, held.log)
            held.process = None
            open(re.sub(r"\.ready$", ".go", held.ready), "w").close()
            return
        if check.prepare:
            check.prepare()
        check.log_path = log
        with open(log, "w") as out:
            out.write(f"$ {shlex.join(check.command)}\n")
            out.flush()
            check.process = subprocess.Popen(check.command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                             env=dict(os.environ, **check.env), start_new_session=True)

    def poll(self, check):
        took = time.monotonic() - check.started
        said_ready = read(check.ready).strip() if check.ready and os.path.exists(check.ready) else ""
        if said_ready:  # an empty file is one still being written: ready at the next poll
            self.finish(check, [(check.name, "INFO", f"ready after {said_ready}; timed in "
                                                     f"{check.key}-timed (log: {check.log})")], keep=True)
        elif check.process.poll() is not None:
            self.finish(check, verdicts(check, check.process.returncode, read(check.log_path), took))
        elif took > check.budget or time.monotonic() - self.started > LIMIT:
            stop(check.process)
            why = f"its budget ({check.budget} s) ran out" if took > check.budget else f"the group's {LIMIT} s ran out"
            rows = [row for row in lines_of(read(check.log_path))] if check.rows == "lines" else []
            self.finish(check, rows + [(check.name, "FAIL", f"stopped after {took:.0f} s: {why} (log: {check.log})")])

    def finish(self, check, results, keep=False):
        check.results, check.state, check.ended = results, "ended", time.monotonic()
        if not keep and check.process is not None:
            stop(check.process)
            check.process = None
        if check.jobs and os.path.isdir(check.jobs):
            target = os.path.join(self.context.logdir, "jobs", check.key)
            os.makedirs(target, exist_ok=True)
            for name in os.listdir(check.jobs):
                if name.endswith(".log"):
                    shutil.copy(os.path.join(check.jobs, name), target)
        for name, verdict, detail in results:
            print(f"== {check.key}: {verdict} {name}: {detail[:300]}", flush=True)
        self.write_table()

    def run(self):
        self.started = time.monotonic()
        self.write_table()

        def stopped(number, _frame):
            for check in self.plan:
                if check.process is not None:
                    stop(check.process)
                if check.state == "running":
                    check.results = [(check.name, "FAIL", f"gpu_check.sh was stopped (signal {number})")]
                    check.state, check.ended = "ended", time.monotonic()
            self.write_table()
            sys.exit(1)

        signal.signal(signal.SIGTERM, stopped)
        signal.signal(signal.SIGINT, stopped)
        while any(check.state != "ended" for check in self.plan):
            for check in self.plan:
                failed = [key for key in check.after + ((check.release,) if check.release else ())
                          if self.by_key[key].gate and self.by_key[key].state == "ended" and
                          any(verdict == "FAIL" for _, verdict, _ in self.by_key[key].results)]
                if check.state == "waiting" and failed:
                    check.started = None
                    self.finish(check, [(check.name, "FAIL", f"not run: {failed[0]} failed (its row)")])
                elif check.state == "waiting" and self.can_start(check):
                    self.start(check)
                    self.write_table()
            for check in self.plan:
                if check.state == "running":
                    self.poll(check)
            time.sleep(0.2)
        for check in self.plan:  # a held process whose release never came
            if check.process is not None:
                stop(check.process)
        self.write_table()
        return [row for check in self.plan for row in check.results]


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def lines_of(text):
    rows = []
    for line in text.splitlines():
        if line.startswith("CHECK|"):
            parts = line.split("|", 3)
            if len(parts) == 4 and parts[2] in ("PASS", "FAIL", "INFO"):
                rows.append((parts[1], parts[2], parts[3]))
    return rows


def verdicts(check, code, text, took):
    """The rows of an ended check, from its exit status and log (after the command line the log starts with)."""
    if text.startswith("$ "):
        text = text.split("\n", 1)[1] if "\n" in text else ""
    last = [line for line in text.splitlines() if line.strip()][-3:]
    if check.rows == "lines":
        rows = lines_of(text)
        if not rows:
            return [(check.name, "FAIL", f"no result; exit {code} after {took:.0f} s: {' / '.join(last)[:300]}")]
        if code != 0 and all(verdict != "FAIL" for _, verdict, _ in rows):
            rows.append((check.name, "FAIL", f"exit {code} after {took:.0f} s (log: {check.log})"))
        return rows
    if check.rows == "machine":
        found = machine_summary(os.path.join(os.path.dirname(check.log_path), check.log))
        return [(check.name, "PASS" if code == 0 else "FAIL",
                 f"{'; '.join(found)[:600] or 'nothing found'}" + ("" if code == 0 else f"; exit {code}: "
                                                                 f"{' / '.join(last)[:300]}"))]
    if check.rows == "sanitizer":
        refused = SANITIZER_REFUSED.search(text)
        summary = next((line.strip("= ") for line in reversed(text.splitlines()) if " SUMMARY: " in line), "")
        if code != 0 and refused:
            line = next(line for line in text.splitlines() if refused.group(0) in line)
            return [(check.name, "INFO", f"this machine refuses the sanitizer: {line.strip('= ')[:200]} (log: "
                                         f"{check.log})")]
        if code == 0:
            return [(check.name, "PASS", f"{summary or 'exit 0'}; {took:.0f} s (log: {check.log})")]
        ours, theirs = sanitizer_reports(text)
        succeeded = check.succeeded and re.search(check.succeeded, text)
        if code == SANITIZER_ERROR_EXIT and theirs and not ours and succeeded:
            return [(check.name, "PASS", f"nothing in our code; {len(theirs)} report(s) inside NVIDIA's libraries, "
                                         f"not ours to mend: {'; '.join(theirs)[:400]}; {succeeded.group(0)}; "
                                         f"{took:.0f} s (log: {check.log})")]
        return [(check.name, "FAIL", f"exit {code}; {summary or ' / '.join(last)[:300]}"
                                     + (f"; in our code: {'; '.join(ours)[:300]}" if ours else "")
                                     + (f"; inside NVIDIA's libraries: {len(theirs)}" if theirs else "")
                                     + ("" if succeeded or not check.succeeded else "; the program did not succeed")
                                     + f"; {took:.0f} s (log: {check.log})")]
    summary = next((line for line in reversed(text.splitlines()) if re.search(r"passed|PASS|FAIL", line)), "")
    if code == 0:
        summary = summary or (last[-1] if last else "")
        return [(check.name, "PASS", f"{summary.strip()[:200] or 'exit 0'}; {took:.0f} s (log: {check.log})")]
    failures = sum(bool(re.search(r"\bFAIL\b", line)) for line in text.splitlines())
    return [(check.name, "FAIL", f"exit {code}; {failures} FAIL lines; {' / '.join(last)[:300]}; {took:.0f} s (log: "
                                 f"{check.log})")]


def sanitizer_reports(text):
    """compute-sanitizer's reports in a log, each as one line, split into ours and those wholly inside NVIDIA's
    libraries (every kernel a race or access names is a library's; an API error's first host frame is in one)."""
    records, record = [], []
    for line in text.splitlines():
        if not line.startswith("========="):
            continue
        body = line[len("========="):]
        if not body.strip():  # a blank ========= line ends a report
            if record:
                records.append(record)
            record = []
        elif body.startswith(" ") and not body.startswith("  ") and record:
            records.append(record)  # a new unindented report without a blank line before it
            record = [body.strip()]
        else:
            record.append(body.strip())
    if record:
        records.append(record)
    ours, theirs = [], []
    for record in records:
        head = record[0]
        if re.match(r"(COMPUTE-SANITIZER|\w+ SUMMARY)", head):
            continue
        if head.startswith("Program hit"):  # an API error: whose call was it?
            frame = next((line for line in record if line.startswith("Host Frame:")), "")
            (theirs if frame and LIBRARY_FILE.search(frame) else ours).append(
                f"{head[:160]} ({frame[:120]})" if frame else head[:200])
            continue
        if not re.match(r"(Error|Warning|Invalid|Barrier|Race|Uninitialized|Out-of-range|Malloc|Free|Leaked)", head):
            continue
        kernels = re.findall(r"\bat (?:0x[0-9a-f]+ in )?(.+?)\+0x[0-9a-f]+", "\n".join(record))
        library = bool(kernels) and all(LIBRARY_KERNEL.search(kernel) for kernel in kernels)
        (theirs if library else ours).append(head[:200])
    return ours, theirs


def machine_summary(path):
    """The record's lines about the machine, from the machine check's log."""
    text = read(path)
    found = []
    cuda = re.search(r"Driver Version:\s*(\S+)\s+CUDA Version:\s*(\S+)", text)
    if cuda:
        found.append(f"driver {cuda.group(1)}, CUDA {cuda.group(2)} (nvidia-smi)")
    for line in text.splitlines():
        if re.match(r"(lib\S+\.so\S*|mpirun|compute-sanitizer|train|PyTorch|CPU cores):", line):
            found.append(line.strip())
    return found


# ---- setting up -----------------------------------------------------------------------------------------------

class Context:
    pass


def gpu_line():
    """nvidia-smi's name of each GPU, or None when there is none to see."""
    if not shutil.which("nvidia-smi"):
        return None
    result = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,compute_cap",
                             "--format=csv,noheader"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=60)
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    return "; ".join(lines) if result.returncode == 0 and lines else None


def unpack(source, folder):
    """The Fashion-MNIST folder (train/, validation/) of a .tgz or folder, at `folder`."""
    if os.path.isdir(os.path.join(source, "train")):
        if os.path.lexists(folder):
            os.remove(folder) if os.path.islink(folder) else shutil.rmtree(folder)
        os.symlink(os.path.abspath(source), folder)
        return 0
    shutil.rmtree(folder, ignore_errors=True)
    staging = folder + ".tmp"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(source) as archive:
        archive.extractall(staging)
    roots = [os.path.join(staging, name) for name in os.listdir(staging)]
    root = roots[0] if len(roots) == 1 and os.path.isdir(os.path.join(roots[0], "train")) else staging
    if not os.path.isdir(os.path.join(root, "train")):
        print(f"gpu_check.sh: {source} holds no train/ folder", file=sys.stderr)
        return 1
    os.rename(root, folder)
    shutil.rmtree(staging, ignore_errors=True)
    print(f"{source}: {sum(len(files) for _, _, files in os.walk(folder))} images in {folder}")
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--unpack":
        return unpack(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 3 and sys.argv[1] == "--machine":
        return describe_machine(sys.argv[2])
    parser = argparse.ArgumentParser(prog="gpu_check.sh", description=__doc__.splitlines()[0], add_help=False)
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--bundle")
    parser.add_argument("--data")
    parser.add_argument("--references")
    parser.add_argument("--work")
    parser.add_argument("--only")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("positional", nargs="*")
    try:
        args = parser.parse_args()
    except SystemExit:
        print("gpu_check.sh: see --help", file=sys.stderr)
        return 64
    if args.help:
        print(__doc__)
        return 0
    if args.list:
        for name, purpose in GROUPS.items():
            print(f"{name:<6} {purpose}")
        return 0
    if len(args.positional) != 2:
        print("gpu_check.sh: expected GROUP LOGDIR (see --help, --list)", file=sys.stderr)
        return 64
    group, logdir = args.positional
    if group not in GROUPS:
        print(f"gpu_check.sh: no group '{group}'; the groups: {', '.join(GROUPS)} (see --list)", file=sys.stderr)
        return 64
    context = Context()
    context.bundle = None
    if args.bundle:
        context.bundle = os.path.abspath(args.bundle)
        if not (os.path.isfile(os.path.join(context.bundle, "run.sh")) and
                os.path.isfile(os.path.join(context.bundle, "bundle.tgz"))):
            print(f"gpu_check.sh: {args.bundle} is not a bundle (run.sh, bundle.tgz): make one with "
                  "scripts/gpu/make_gpu_bundle.sh", file=sys.stderr)
            return 64
    context.programs = Programs(context.bundle)
    context.logdir = os.path.abspath(logdir)
    context.work = os.path.abspath(args.work or os.path.join("/tmp", "gpu-check", group))
    context.data = os.path.abspath(args.data) if args.data else (
        os.path.join(context.bundle, "fashion.tgz") if context.bundle else "(no --data)")
    context.folder = os.path.join(context.work, "fashion")
    context.references = os.path.abspath(args.references) if args.references else (
        os.path.join(context.bundle, "references") if context.bundle else None)
    context.command = "bash scripts/gpu/gpu_check.sh " + shlex.join(sys.argv[1:])
    context.began = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    made = os.path.join(context.bundle or "", "made.txt")
    context.bundle_made = read(made).strip() if context.bundle and os.path.exists(made) else (
        "none (this checkout's build/)" if not context.bundle else "unknown (no made.txt)")
    try:
        plan = PLANS[group](context)
        if args.only:
            plan = select(plan, [key for key in args.only.split(",") if key])
        window = worst_case(plan)
    except ValueError as error:
        print(f"gpu_check.sh: {error}", file=sys.stderr)
        return 64
    total = max(end for _, end in window.values())
    if total > LIMIT:
        print_plan(group, plan, window)
        print(f"gpu_check.sh: {group}: the budgets add up to {total} s in the worst case, more than the {LIMIT} s a "
              "group may take: lower them, or move a check to the other group", file=sys.stderr)
        return 64
    if args.dry_run:
        print_plan(group, plan, window)
        print(f"gpu_check.sh: {group}: dry run, nothing was run")
        return 0
    context.gpu = gpu_line()
    if context.gpu is None:
        print("gpu_check.sh: no GPU visible (nvidia-smi lists none); nothing was checked", file=sys.stderr)
        return 2
    if any(check.key == "data" for check in plan) and not os.path.exists(context.data):
        print(f"gpu_check.sh: no Fashion-MNIST ({context.data}): pass --bundle, or --data (and --references)",
              file=sys.stderr)
        return 64
    os.makedirs(context.logdir, exist_ok=True)
    shutil.rmtree(context.work, ignore_errors=True)
    os.makedirs(context.work)
    print(f"== gpu_check.sh {group} on {context.gpu}: {len(plan)} checks, worst case {total} s; logs in "
          f"{context.logdir}", flush=True)
    rows = Group(group, plan, context).run()
    print(read(os.path.join(context.logdir, "table.md")))
    failed = [name for name, verdict, _ in rows if verdict == "FAIL"]
    counts = {verdict: sum(row[1] == verdict for row in rows) for verdict in ("PASS", "FAIL", "INFO")}
    print(f"gpu_check.sh: {group}: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['INFO']} INFO "
          f"(table: {os.path.join(context.logdir, 'table.md')})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
