#!/usr/bin/env python3
"""ResNet training-step throughput on one GPU: train's CUDA engine against PyTorch eager and torch.compile,
measured in the same run on the same GPU, printed as one table with ratios.

    python3 scripts/bench/gpu_step_bench.py [--ours "CMD"] [--variants reference,fast] [--peers eager,compile]
                                            [--batches 64,128,256] [--steps 20] [--rounds 3] [--depth 50]
                                            [--size 224] [--precision bfloat16] [--json OUT]
                                            [--against OURS.json] [--ready FILE --go FILE [--go-timeout S]]

--ours is the command that runs gpu_step_bench (scripts/bench/gpu_step_bench.cpp; default
build/scripts/bench/gpu_step_bench, or e.g. "bash .gpu-bundle/run.sh gpu_step_bench" on a machine
with a bundle). Every variant trains ResNet-`depth` on synthetic `size`x`size` images with SGD (momentum 0.9,
weight decay 1e-4) at each batch size:
  reference, fast (--variants; "none" for neither): ours, TRAIN_SHARED_GRADIENT_BUFFERS=0 and =1: the batch copied from pinned
            host memory every step, bf16 forward/backward with fp32 master weights, the bucketed NCCL allreduce
            (one rank), the multi-tensor optimizer: what `train` runs;
  eager:    torchvision's resnet, channels_last, bf16 autocast, cudnn.benchmark, data already on the GPU;
  compile:  the same, the model under torch.compile (forward and backward; the optimizer, a multi-tensor
            update of under 1% of the step, stays eager: compiling it too costs tens of seconds of compile
            time and no step time).
A round is `steps` steps timed from the first launch to the end of the last on the device (CUDA events for
PyTorch); the best of `rounds` rounds is reported, every round is in the JSON. Memory: ours is what the
engine took from the device (cudaMemGetInfo before and after); PyTorch's is torch.cuda.max_memory_allocated
(and max_memory_reserved in the JSON). Needs PyTorch with CUDA and torchvision for --peers.

--ready/--go (one batch size, one peer, no variant of ours): build, compile and warm up the peer, write FILE
--ready, then wait for FILE --go (at most --go-timeout s, then exit 3) before timing: gpu_check.sh compiles while
other checks run and times alone. --against reads ours' figures from an earlier --json for the ratios.
Besides the table, one line per batch size for gpu_check.sh: "CHECK|name|INFO|detail". Exit 1 when a variant
could not be measured.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIB = 1024.0 ** 3


def prepare_peer(mode, depth, size, batch, precision):
    """A PyTorch training step (eager or compiled) built and warmed up (compile: traced and compiled): a
    function that times it."""
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = getattr(torchvision.models, f"resnet{depth}")().to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4, foreach=True)
    images = torch.randn(batch, 3, size, size, device=device).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    dtype = torch.bfloat16 if precision == "bfloat16" else torch.float32
    forward = torch.compile(model) if mode == "compile" else model

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
            loss = loss_fn(forward(images), labels)
        loss.backward()
        optimizer.step()

    started = time.monotonic()
    for _ in range(5 if mode == "eager" else 10):  # warm-up (compile: tracing, compiling, autotuning)
        step()
    torch.cuda.synchronize()
    prepared = time.monotonic() - started

    def measure(steps, rounds):
        results = []
        for _ in range(rounds):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(steps):
                step()
            end.record()
            end.synchronize()
            results.append(batch * steps / (start.elapsed_time(end) / 1000.0))
        figures = {"images_per_sec": max(results), "rounds": results, "prepare_seconds": round(prepared, 1),
                   "device_bytes": torch.cuda.max_memory_allocated(),
                   "reserved_bytes": torch.cuda.max_memory_reserved()}
        if mode == "compile":
            torch._dynamo.reset()  # the compiled step holds the model: let it go before the next batch size
        return figures

    return measure


def ours_bench(command, depth, size, batches, steps, rounds, precision, fast_path):
    env = dict(os.environ, TRAIN_SHARED_GRADIENT_BUFFERS="1" if fast_path else "0")
    args = shlex.split(command) + ["--depth", str(depth), "--size", str(size), "--steps", str(steps),
                                   "--rounds", str(rounds), "--precision", precision,
                                   "--batches", ",".join(str(b) for b in batches)]
    result = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1800, env=env)
    if result.returncode != 0:
        error = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        return {batch: {"error": f"exit {result.returncode}: {error}"[:160]} for batch in batches}
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {row["batch"]: row for row in rows}


def wait_for(path, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def describe(figures):
    if figures is None:
        return "-"
    if "error" in figures:
        return figures["error"]
    return f"{figures['images_per_sec']:,.0f} img/s, {figures['device_bytes'] / GIB:.1f} GiB"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ours", default=os.path.join(ROOT, "build", "scripts", "bench", "gpu_step_bench"))
    parser.add_argument("--variants", default="reference,fast", help="ours: reference, fast, both, or none")
    parser.add_argument("--peers", default="eager,compile", help="PyTorch: eager, compile, both, or none")
    parser.add_argument("--batches", default="64,128,256")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--depth", type=int, default=50)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--precision", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--json", default=None, help="write every figure here")
    parser.add_argument("--against", default=None, help="ours' figures from an earlier --json, for the ratios")
    parser.add_argument("--ready", default=None, help="written once the peer is compiled and warm (with --go)")
    parser.add_argument("--go", default=None, help="timing starts once this file exists (with --ready)")
    parser.add_argument("--go-timeout", type=float, default=600)
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    variants = [v for v in args.variants.split(",") if v and v != "none"]
    modes = [m for m in args.peers.split(",") if m and m != "none"]
    if set(variants) - {"reference", "fast"} or set(modes) - {"eager", "compile"}:
        parser.error("--variants takes reference, fast or none; --peers eager, compile or none")
    if bool(args.ready) != bool(args.go) or (args.ready and (len(batches) != 1 or len(modes) != 1 or variants)):
        parser.error("--ready and --go go together, with one batch size, one peer and --variants none")

    started = time.time()
    peers, measures = {}, {}
    for mode in modes:
        for batch in batches:
            try:
                measures[(mode, batch)] = prepare_peer(mode, args.depth, args.size, batch, args.precision)
                if not args.ready:  # one at a time: each measured as soon as it is built
                    peers[(mode, batch)] = measures.pop((mode, batch))(args.steps, args.rounds)
            except Exception as error:  # noqa: BLE001 - reported in the table (out of memory, no compiler)
                peers[(mode, batch)] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"}
    if args.ready and measures:
        # Whole or not at all: the runner reads the file as soon as it appears (a temporary name, then renamed).
        with open(args.ready + ".tmp", "w") as f:
            f.write(f"{time.time() - started:.0f} s\n")
        os.replace(args.ready + ".tmp", args.ready)
        print(f"gpu_step_bench.py: {modes[0]} at batch {batches[0]} ready after {time.time() - started:.0f} s; "
              f"waiting for {args.go}", flush=True)
        if not wait_for(args.go, args.go_timeout):
            print(f"gpu_step_bench.py: {args.go} did not appear within {args.go_timeout:.0f} s", file=sys.stderr)
            return 3
        for key, measure in measures.items():
            peers[key] = measure(args.steps, args.rounds)

    ours = {variant: ours_bench(args.ours, args.depth, args.size, batches, args.steps, args.rounds, args.precision,
                                fast_path=variant == "fast")
            for variant in variants}
    if args.against:
        try:
            with open(args.against) as f:
                earlier = json.load(f)["ours"]
        except (OSError, ValueError, KeyError) as error:
            earlier = {"reference": {batch: {"error": f"no figures of ours ({error})"[:160]} for batch in batches}}
        for variant, rows in earlier.items():
            ours.setdefault(variant, {int(batch): row for batch, row in rows.items()})

    gpu = next((row.get("gpu") for rows in ours.values() for row in rows.values() if row.get("gpu")), None)
    if gpu is None:
        try:
            import torch
            gpu = torch.cuda.get_device_name(0)
        except Exception as error:  # noqa: BLE001 - the figures matter more than the name
            gpu = f"GPU (unnamed: {type(error).__name__})"
    print(f"\nResNet-{args.depth}, {args.size}x{args.size}, {args.precision}, SGD momentum 0.9, one {gpu}; best of "
          f"{args.rounds} rounds of {args.steps} steps ({time.time() - started:.0f} s in all)\n")
    print("| batch | variant | img/s | GiB | vs eager | vs compile |")
    print("|---|---|---|---|---|---|")
    for batch in batches:
        rows = [(f"ours, {variant}", ours[variant].get(batch, {"error": "not measured"})) for variant in ours]
        rows += [(mode, peers[(mode, batch)]) for mode in ("eager", "compile") if (mode, batch) in peers]
        for variant, figures in rows:
            if "error" in figures:
                print(f"| {batch} | {variant} | {figures['error'][:60]} | - | - | - |")
                continue
            ratios = []
            for mode in ("eager", "compile"):
                peer = peers.get((mode, batch))
                ratios.append("-" if peer is None or "error" in peer else
                              f"{figures['images_per_sec'] / peer['images_per_sec']:.2f}")
            print(f"| {batch} | {variant} | {figures['images_per_sec']:,.0f} | {figures['device_bytes'] / GIB:.1f} | "
                  + " | ".join(ratios) + " |")
    print()
    for batch in batches:
        parts = [f"ours ({variant}) {describe(ours[variant].get(batch))}" for variant in ours]
        for mode in ("eager", "compile"):
            peer = peers.get((mode, batch))
            if peer is None:
                continue
            parts.append(f"PyTorch {mode} {describe(peer)}" + (f" (compiled in {peer['prepare_seconds']:.0f} s)"
                                                                  if mode == "compile" and "error" not in peer else ""))
            for variant in ours:
                mine = ours[variant].get(batch)
                if mine and "error" not in mine and "error" not in peer:
                    parts.append(f"{variant}/{mode} {mine['images_per_sec'] / peer['images_per_sec']:.2f}x")
        against = "/".join(mode for mode in ("eager", "compile") if (mode, batch) in peers) or "none"
        print(f"CHECK|ResNet-{args.depth} {args.precision} img/s at batch {batch}, the CUDA engine beside PyTorch "
              f"{against}|INFO|{'; '.join(parts)}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu, "ours": ours,
                       "peers": {f"{mode}-{batch}": value for (mode, batch), value in peers.items()}}, f, indent=1)
    failed = [figures for rows in ours.values() for figures in rows.values() if "error" in figures]
    failed += [figures for figures in peers.values() if "error" in figures]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
