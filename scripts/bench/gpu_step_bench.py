#!/usr/bin/env python3
"""ResNet training-step throughput on one GPU: train's CUDA engine against PyTorch eager and torch.compile,
measured in the same run on the same GPU, printed as one table with ratios.

    python3 scripts/bench/gpu_step_bench.py [--ours "CMD"] [--batches 64,128,256] [--steps 20] [--rounds 3]
                                            [--depth 50] [--size 224] [--precision bfloat16] [--json OUT]

--ours is the command that runs gpu_step_bench (scripts/bench/gpu_step_bench.cpp; default
build/scripts/bench/gpu_step_bench, or e.g. "bash .gpu-bundle/run.sh gpu_step_bench" on a machine
with a bundle). Every variant trains ResNet-`depth` on synthetic `size`x`size` images with SGD (momentum 0.9,
weight decay 1e-4) at each batch size:
  ours:     (twice: the reference path, and TRAIN_FAST_PATH=1's fast path) the batch copied from pinned host memory every step, bf16 forward/backward with fp32 master
            weights, the bucketed NCCL allreduce (one rank), the multi-tensor optimizer: what `train` runs;
  eager:    torchvision's resnet, channels_last, bf16 autocast, cudnn.benchmark, data already on the GPU;
  compile:  the same step (forward, loss, backward, optimizer) under torch.compile.
A round is `steps` steps timed from the first launch to the end of the last on the device (CUDA events for
PyTorch); the best of `rounds` rounds is reported, every round is in the JSON. Memory: ours is what the
engine took from the device (cudaMemGetInfo before and after); PyTorch's is torch.cuda.max_memory_allocated
(and max_memory_reserved in the JSON). Needs PyTorch with CUDA and torchvision.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torch_bench(mode, depth, size, batch, steps, rounds, precision):
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = getattr(torchvision.models, f"resnet{depth}")().to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    images = torch.randn(batch, 3, size, size, device=device).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    dtype = torch.bfloat16 if precision == "bfloat16" else torch.float32

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()

    run = torch.compile(step) if mode == "compile" else step
    for _ in range(5 if mode == "eager" else 10):  # warm-up (compile: tracing and autotuning)
        run()
    torch.cuda.synchronize()
    results = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            run()
        end.record()
        end.synchronize()
        results.append(batch * steps / (start.elapsed_time(end) / 1000.0))
    allocated = torch.cuda.max_memory_allocated()
    reserved = torch.cuda.max_memory_reserved()
    if mode == "compile":
        torch._dynamo.reset()  # the compiled step holds the model: let it go before the next batch size
    return {"images_per_sec": max(results), "rounds": results, "device_bytes": allocated,
            "reserved_bytes": reserved}


def ours_bench(command, depth, size, batches, steps, rounds, precision, fast_path):
    env = dict(os.environ, TRAIN_FAST_PATH="1" if fast_path else "0")
    args = shlex.split(command) + ["--depth", str(depth), "--size", str(size), "--steps", str(steps),
                                   "--rounds", str(rounds), "--precision", precision,
                                   "--batches", ",".join(str(b) for b in batches)]
    result = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1800, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {row["batch"]: row for row in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ours", default=os.path.join(ROOT, "build", "scripts", "bench", "gpu_step_bench"))
    parser.add_argument("--batches", default="64,128,256")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--depth", type=int, default=50)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--precision", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes minutes)")
    parser.add_argument("--json", default=None, help="write every figure here")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]

    started = time.time()
    ours = {variant: ours_bench(args.ours, args.depth, args.size, batches, args.steps, args.rounds, args.precision,
                                fast_path=variant == "ours, fast path")
            for variant in ("ours", "ours, fast path")}
    peers = {}
    for mode in ["eager"] + ([] if args.no_compile else ["compile"]):
        for batch in batches:
            try:
                peers[(mode, batch)] = torch_bench(mode, args.depth, args.size, batch, args.steps, args.rounds,
                                                   args.precision)
            except Exception as error:  # noqa: BLE001 - reported in the table (out of memory, no compiler)
                peers[(mode, batch)] = {"error": str(error).splitlines()[0][:120]}

    import torch
    gpu = torch.cuda.get_device_name(0)
    print(f"\nResNet-{args.depth}, {args.size}x{args.size}, {args.precision}, SGD momentum 0.9, one {gpu}; best of "
          f"{args.rounds} rounds of {args.steps} steps ({time.time() - started:.0f} s in all)\n")
    print("| batch | variant | img/s | GiB | vs eager | vs compile |")
    print("|---|---|---|---|---|---|")
    gib = 1024.0 ** 3
    for batch in batches:
        rows = [(variant, ours[variant].get(batch, {})) for variant in ours]
        rows += [(mode, peers.get((mode, batch))) for mode in ("eager", "compile") if (mode, batch) in peers]
        for variant, figures in rows:
            if "error" in figures:
                print(f"| {batch} | {variant} | {figures['error'][:60]} | - | - | - |")
                continue
            speed = figures.get("images_per_sec", float("nan"))
            ratios = []
            for mode in ("eager", "compile"):
                peer = peers.get((mode, batch))
                ratios.append("-" if peer is None or "error" in peer else f"{speed / peer['images_per_sec']:.2f}")
            print(f"| {batch} | {variant} | {speed:,.0f} | {figures.get('device_bytes', float('nan')) / gib:.1f} | "
                  + " | ".join(ratios) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu, "ours": ours,
                       "peers": {f"{mode}-{batch}": value for (mode, batch), value in peers.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
