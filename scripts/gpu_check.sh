#!/usr/bin/env bash
# scripts/gpu_check.sh: every GPU check, on a machine with an NVIDIA GPU, ending with one table. CI has no
# GPU: it only builds the programs.
#
# Usage:
#   scripts/gpu_check.sh [--data FASHION] [--only LIST] [--out DIR] [--quick]
#       configure and build (TRAIN_CUDA=ON) into build-gpu, then run the checks
#   scripts/gpu_check.sh --bundle DIR [--data FASHION] ...
#       run the programs of a bundle made elsewhere (a machine with the NVIDIA driver, cuDNN/cuBLAS/NCCL and
#       Open MPI but none of the build's dependencies); build nothing. Make the bundle where the project
#       builds: scripts/make_gpu_bundle.sh (it also writes the Fashion-MNIST archive for --data).
#
#   --data FASHION   a Fashion-MNIST image folder or .tgz of one (scripts/make_fashion_mnist_folder.py);
#                    without it the training checks make one when Debian's dataset-fashion-mnist is installed
#   --only LIST      comma-separated subset of: kernels,nccl,step,train,fast,bench (default: all)
#   --out DIR        where logs go (default: a new temporary folder)
#   --quick          the benchmark without torch.compile and with fewer steps
#
# What runs, in order (each row of the final table is PASS, FAIL or INFO):
#   kernels  gpu_kernel_check: every CUDA op against the CPU reference (kernels/cpu), fp32 and bf16
#   nccl     gpu_nccl_check under mpirun, one rank per GPU: the bucketed NCCL allreduce averages, bit for bit
#            the same on every rank
#   step     gpu_step_check: a whole training step of ResNet-50/18 on the GPU against the CPU model
#   train    scripts/gpu_training_check.py: `train` with device=cuda on Fashion-MNIST against device=cpu,
#            SIGTERM and resume bit-identical, the model file in torchvision
#   fast     the step check and the training checks again with TRAIN_FAST_PATH=1 (the step's fast path)
#   bench    scripts/bench/gpu_step_bench.py: the CUDA engine's img/s and memory at batch 64/128/256 against
#            PyTorch eager and torch.compile on the same GPU, reference and fast path (INFO: figures)
#
# Exit status: 0 when every check passed; 1 when any failed; 2 when no GPU is visible; 64 for usage errors.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$repo/build-gpu"
bundle=""
data=""
only="kernels,nccl,step,train,fast,bench"
out=""
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) bundle="$(cd "$2" && pwd)"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
done
out="${out:-$(mktemp -d -t gpu-check-XXXXXX)}"
mkdir -p "$out"
wanted() { [[ ",$only," == *",$1,"* ]]; }

echo "== GPU"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
  gpus="$(nvidia-smi --list-gpus 2>/dev/null | wc -l)"
else
  echo "nvidia-smi not found (no NVIDIA driver on this machine?)"
  gpus=0
fi

# How each program runs: from the bundle (its runner sets the libraries' paths) or from the build.
if [[ -n "$bundle" ]]; then
  run() { bash "$bundle/gpu-bundle-run.sh" "$@"; }
  program() { echo "bash $bundle/gpu-bundle-run.sh $1"; }
else
  echo "== build ($build_dir)"
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  cmake -S "$repo" -B "$build_dir" "${generator[@]}" -DTRAIN_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON \
    > "$out/configure.log" || { echo "gpu_check.sh: configure failed ($out/configure.log)" >&2; exit 1; }
  cmake --build "$build_dir" -j"$(nproc)" --target train gpu_kernel_check gpu_nccl_check gpu_step_check gpu_infer \
    gpu_step_bench > "$out/build.log" || { echo "gpu_check.sh: build failed ($out/build.log)" >&2; exit 1; }
  declare -A path_of=([train]="$build_dir/train" [gpu_kernel_check]="$build_dir/tests/gpu/gpu_kernel_check"
    [gpu_nccl_check]="$build_dir/tests/gpu/gpu_nccl_check" [gpu_step_check]="$build_dir/tests/gpu/gpu_step_check"
    [gpu_infer]="$build_dir/tests/gpu/gpu_infer" [gpu_step_bench]="$build_dir/scripts/bench/gpu_step_bench")
  run() {
    if [[ "$1" == mpirun ]]; then
      shift
      local args=() arg
      for arg in "$@"; do args+=("${path_of[$arg]:-$arg}"); done
      mpirun --allow-run-as-root "${args[@]}"
    else
      local name="$1"; shift; "${path_of[$name]}" "$@"
    fi
  }
  program() { echo "${path_of[$1]}"; }
fi

rows=()
status=0
row() {  # name, PASS|FAIL|INFO, detail
  rows+=("$1|$2|$3")
  [[ "$2" == FAIL ]] && status=1
  return 0
}
# Runs one check program, its output to a log; a row from its exit status (2: no GPU, the whole run stops).
check_program() {  # name, log, command...
  local name="$1" log="$2"; shift 2
  echo "== $name"
  "$@" 2>&1 | tee "$log"
  local code=${PIPESTATUS[0]}
  if [[ $code -eq 2 ]]; then echo "gpu_check.sh: no GPU visible; nothing was checked" >&2; exit 2; fi
  local summary
  summary="$(grep -E 'passed' "$log" | tail -n 1 | tr -d '|')"
  if [[ $code -eq 0 ]]; then row "$name" PASS "${summary:-exit 0} (log: $log)"
  else row "$name" FAIL "exit $code; $(grep -c FAIL "$log") FAIL lines (log: $log)"; fi
}

[[ $gpus -ge 1 ]] || { echo "gpu_check.sh: no GPU visible; nothing was checked" >&2; exit 2; }

if wanted kernels; then
  check_program "CUDA kernels vs CPU reference (gpu_kernel_check)" "$out/gpu_kernel_check.log" run gpu_kernel_check
fi
if wanted nccl; then
  check_program "NCCL gradient buckets, $gpus rank(s) (gpu_nccl_check)" "$out/gpu_nccl_check.log" \
    run mpirun --oversubscribe --bind-to none -np "$gpus" gpu_nccl_check
fi
if wanted step; then
  check_program "whole training step, GPU vs CPU (gpu_step_check)" "$out/gpu_step_check.log" run gpu_step_check
fi
# The training checks (scripts/gpu_training_check.py), their rows prefixed with $1; the data made once.
training_checks() {  # row prefix, work folder
  if [[ -z "$data" ]]; then
    data="$out/fashion"
    /usr/bin/env python3 "$repo/scripts/make_fashion_mnist_folder.py" --limit 12000 "$data" > "$out/fashion.log" 2>&1 ||
      { row "$1train on the GPU" FAIL "no --data and no Fashion-MNIST here to convert ($out/fashion.log)"; data=""; }
  fi
  [[ -n "$data" ]] || return 0
  local log="$2.log"
  python3 "$repo/scripts/gpu_training_check.py" --data "$data" --train "$(program train)" \
    --infer "$(program gpu_infer)" --work "$2" 2>&1 | tee "$log"
  while IFS='|' read -r _ name verdict detail; do row "$1$name" "$verdict" "$detail"; done < <(grep '^CHECK|' "$log")
  grep -q '^CHECK|' "$log" || row "$1train on the GPU" FAIL "no result ($log)"
}
if wanted train; then
  echo "== train on the GPU (scripts/gpu_training_check.py)"
  training_checks "" "$out/training"
fi
if wanted fast; then
  TRAIN_FAST_PATH=1 check_program "fast path: whole training step, GPU vs CPU (TRAIN_FAST_PATH=1 gpu_step_check)" \
    "$out/gpu_step_check_fast.log" run gpu_step_check
  echo "== fast path: train on the GPU (TRAIN_FAST_PATH=1 scripts/gpu_training_check.py)"
  TRAIN_FAST_PATH=1 training_checks "fast path: " "$out/training_fast"
fi
if wanted bench; then
  echo "== GPU step benchmark (scripts/bench/gpu_step_bench.py)"
  bench_args=()
  [[ $quick -eq 1 ]] && bench_args=(--no-compile --steps 10 --rounds 2)
  if python3 "$repo/scripts/bench/gpu_step_bench.py" --ours "$(program gpu_step_bench)" --json "$out/gpu_step_bench.json" \
      "${bench_args[@]}" 2>&1 | tee "$out/gpu_step_bench.log"; then
    row "ResNet-50 step img/s vs PyTorch (gpu_step_bench.py)" INFO "table above; figures in $out/gpu_step_bench.json"
  else
    row "ResNet-50 step img/s vs PyTorch (gpu_step_bench.py)" FAIL "see $out/gpu_step_bench.log"
  fi
fi

echo
echo "| check | result | detail |"
echo "|---|---|---|"
for entry in "${rows[@]}"; do
  IFS='|' read -r name verdict detail <<<"$entry"
  echo "| $name | $verdict | $detail |"
done
if [[ $status -eq 0 ]]; then echo "gpu_check.sh: all checks passed (logs in $out)"
else echo "gpu_check.sh: FAILURES (logs in $out)" >&2; fi
exit $status
