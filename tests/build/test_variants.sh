#!/usr/bin/env bash
# Both build variants exist and are what they claim: build/train has the CUDA backend when a CUDA
# toolkit is installed, build/cpu-only/train never has it, and neither loads libstdc++, libgcc_s, fmt or the
# CUDA runtime dynamically. The CUDA variant loads the GPU trainer's libraries (cuDNN, cuBLAS and, through it,
# cuBLASLt, NCCL: the CUDA image carries them); the CPU variant none. The CPU-only binary also runs a real
# 2-rank job.
set -euo pipefail
main_binary="$1"
cpu_binary="$2"
static_libraries="${3:-ON}"  # TRAIN_STATIC_LIBRARIES of the build
failures=0
passes=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; passes=$((passes + 1)); }

[ -x "$main_binary" ] || { echo "FAIL: $main_binary is missing: run scripts/setup.sh"; exit 1; }
[ -x "$cpu_binary" ] || { echo "FAIL: $cpu_binary is missing: run scripts/setup.sh"; exit 1; }

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if "$main_binary" --version | grep -q "CUDA backend: built in"; then pass "build/train has the CUDA backend"
  else fail "a CUDA toolkit is installed but build/train says: $("$main_binary" --version)"; fi
else
  echo "note: no CUDA toolkit on this machine; build/train is CPU-only too"
fi
if "$cpu_binary" --version | grep -q "CUDA backend: not built"; then pass "$cpu_binary is CPU-only"
else fail "$cpu_binary says: $("$cpu_binary" --version)"; fi

gpu_libraries="libcudnn.so.9 libcublas.so.13 libnccl.so.2"  # cuBLASLt comes with cuBLAS
for binary in "$main_binary" "$cpu_binary"; do
  # The binary's own dependencies (NEEDED), not ldd's closure: system libraries such as OpenBLAS bring
  # libgcc_s with them, which is theirs, not ours.
  libraries=$(readelf -d "$binary" | grep NEEDED)
  for unwanted in libstdc++ libgcc_s libfmt libcudart libcuda.so; do
    if grep -q "$unwanted" <<<"$libraries"; then fail "$binary loads $unwanted dynamically"; fi
  done
  pass "$binary links libstdc++, libgcc, fmt and the CUDA runtime statically"
  # Only what must match the host stays shared (cmake/linked_libraries.cmake says why each): glibc, Open MPI,
  # zlib (Open MPI loads it anyway) and the CUDA libraries; libjpeg-turbo, libpng, OpenBLAS and OpenMP are in.
  shared_ok='^(libc\.so\.6|libm\.so\.6|ld-linux-x86-64\.so\.2|libmpi\.so\.40|libz\.so\.1|libcudnn\.so\.9|libcublas(Lt)?\.so\.13|libnccl\.so\.2)$'
  if [ "$static_libraries" = OFF ]; then shared_ok='.'; fi  # a build that asked for them shared
  others=$(sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' <<<"$libraries" | grep -v -E "$shared_ok" || true)
  if [ -n "$others" ]; then fail "$binary loads $(tr '\n' ' ' <<<"$others")dynamically: only glibc, Open MPI, zlib and the CUDA libraries may stay shared (cmake/linked_libraries.cmake)"
  else pass "$binary links libjpeg-turbo, libpng, OpenBLAS and OpenMP in: it loads only $(sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' <<<"$libraries" | tr '\n' ' ')"; fi
  if "$binary" --version | grep -q "CUDA backend: built in"; then
    for library in $gpu_libraries; do
      if grep -q "\[$library\]" <<<"$libraries"; then pass "$binary loads $library (the GPU trainer)"
      else fail "$binary (CUDA backend) does not load $library: the CUDA engine is missing"; fi
    done
  else
    for library in libnccl libcublas libcudnn; do
      if grep -q "$library" <<<"$libraries"; then fail "$binary (CPU-only) loads $library"; fi
    done
  fi
done
if ldd "$cpu_binary" | grep -qi cuda; then fail "$cpu_binary loads a CUDA library"; fi

job=$(mktemp -d)
trap 'rm -rf "$job"' EXIT
mkdir -p "$job/input/config"
echo '{"current_host": "algo-1", "hosts": ["algo-1"]}' > "$job/input/config/resourceconfig.json"
# One training step of ResNet-18 on synthetic 16x16 images: the smallest real job.
echo '{"processes_per_host": "2", "data_format": "synthetic", "num_classes": "10", "num_layers": "18",
       "image_shape": "3,16,16", "mini_batch_size": "4", "max_steps": "1", "checkpoint_frequency": "0"}' \
  > "$job/input/config/hyperparameters.json"
if output=$(SAGEMAKER_BASE_DIR="$job" timeout 120 "$cpu_binary" 2>&1); then
  if [ -f "$job/output/success" ] && [ -f "$job/model/model.safetensors" ] &&
     grep -q "allreduce check passed: 2 ranks" <<<"$output"; then
    pass "$cpu_binary trained a 2-rank job and wrote its model"
  else
    fail "$cpu_binary exited 0 without a success file or allreduce line: $output"
  fi
else
  fail "$cpu_binary failed a 2-rank job: $output"
fi

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
