#!/usr/bin/env bash
# scripts/gpu_check.sh: the GPU checks, on a machine with an NVIDIA GPU (CI has none: it only builds them).
#
# Usage:
#   scripts/gpu_check.sh                         configure + build (TRAIN_CUDA=ON) into build-gpu, then run
#   scripts/gpu_check.sh --build-dir DIR         the same with another build directory
#   scripts/gpu_check.sh --binary PATH           run an existing gpu_kernel_check binary, build nothing
#   scripts/gpu_check.sh ... -- ARGS             pass ARGS to gpu_kernel_check (e.g. -- --only bn --seed 7)
#
# What runs, in order:
#   1. nvidia-smi's name of the GPU (and driver), so every log says what it measured;
#   2. gpu_kernel_check: every CUDA op against the CPU reference (kernels/cpu), fp32 and bf16, NaN-poisoned
#      outputs, timings, determinism (see tests/gpu/gpu_kernel_check.cpp for shapes and tolerances);
#   3. gpu_nccl_check under mpirun, one rank per GPU: the bucketed NCCL allreduce averages and agrees
#      bit for bit across ranks;
#   4. gpu_step_check: one whole training step (forward, loss, backward, SGD) of ResNet-50 and ResNet-18 on
#      the GPU against the CPU backend on the same weights and batch, fp32 and bf16, and the model file
#      written from the GPU model (tests/gpu/gpu_step_check.cpp states the tolerances).
#
# Exit status: 0 when every check passed; 1 when any failed; 2 when no GPU is visible; other non-zero
# statuses for build or usage errors.

set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$repo/build-gpu"
binary=""
check_args=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    --) shift; check_args=("$@"); break ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
done

echo "== GPU"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
else
  echo "nvidia-smi not found (no NVIDIA driver on this machine?)"
fi

if [[ -z "$binary" ]]; then
  echo "== build ($build_dir)"
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  cmake -S "$repo" -B "$build_dir" "${generator[@]}" -DTRAIN_CUDA=ON -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build_dir" -j"$(nproc)" --target gpu_kernel_check gpu_nccl_check gpu_step_check
  binary="$build_dir/tests/gpu/gpu_kernel_check"
fi
if [[ ! -x "$binary" ]]; then
  echo "gpu_check.sh: no executable at $binary" >&2
  exit 66
fi

status=0

echo "== kernel checks ($binary)"
set +e
"$binary" "${check_args[@]}"
kernel_status=$?
set -e
if [[ $kernel_status -eq 2 ]]; then
  echo "gpu_check.sh: no GPU visible; nothing was checked" >&2
  exit 2
fi
if [[ $kernel_status -ne 0 ]]; then status=1; fi

# The NCCL gradient reducer: one rank per GPU, the average over ranks in every bucket, bit-identical on
# every rank, fp32 and bf16, several bucket thresholds (tests/gpu/gpu_nccl_check.cpp).
nccl_check="$(dirname "$binary")/gpu_nccl_check"
if [[ -x "$nccl_check" ]]; then
  gpus="$(nvidia-smi --list-gpus 2>/dev/null | wc -l)"
  [[ "$gpus" -ge 1 ]] || gpus=1
  echo "== NCCL gradient buckets ($gpus rank(s), one per GPU)"
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$gpus" "$nccl_check" || status=1
else
  echo "gpu_check.sh: $nccl_check is missing; the NCCL check did not run" >&2
  status=1
fi

# Whole-training-step checks (GPU step vs CPU step on the same weights and batch) go here once they
# exist; each sets status=1 on a miss.
run_step_checks() {
  # GpuResNet's whole step (fp32 and bf16) against CpuResNet<float>: loss, every gradient, BN statistics,
  # the SGD update, inference and the model file (tests/gpu/gpu_step_check.cpp for cases and tolerances).
  local step_check
  step_check="$(dirname "$binary")/gpu_step_check"
  if [[ ! -x "$step_check" && "$binary" == "$build_dir/tests/gpu/gpu_kernel_check" ]]; then
    cmake --build "$build_dir" -j"$(nproc)" --target gpu_step_check || true
  fi
  if [[ ! -x "$step_check" ]]; then
    echo "gpu_check.sh: $step_check is missing; the step check did not run" >&2
    status=1
    return
  fi
  echo "== whole training step, GPU vs CPU ($step_check)"
  "$step_check" || status=1
}
run_step_checks

if [[ $status -eq 0 ]]; then
  echo "== gpu_check.sh: all checks passed"
else
  echo "== gpu_check.sh: FAILURES (see above)" >&2
fi
exit $status
