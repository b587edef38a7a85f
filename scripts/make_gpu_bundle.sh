#!/usr/bin/env bash
# scripts/make_gpu_bundle.sh: everything scripts/gpu_check.sh needs on a GPU machine that cannot build the
# project (it has the NVIDIA driver, cuDNN/cuBLAS/NCCL and Open MPI, but not our build dependencies):
#   .gpu-bundle/   train and the GPU check and benchmark programs with the shared libraries they need that
#                  are neither CUDA's, MPI's nor glibc's (made by a bundler: GPU_BUNDLER, by default
#                  ../shared/tools/gpu-bundle.sh beside the repository)
#   .gpu-data/fashion.tgz   12,000 training and 10,000 validation Fashion-MNIST images as an image folder (Debian's dataset-fashion-mnist)
# Both folders are ignored by git. Then, on the GPU machine, from a copy of the repository with both:
#   bash scripts/gpu_check.sh --bundle .gpu-bundle --data .gpu-data/fashion.tgz
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bundler="${GPU_BUNDLER:-$repo/../shared/tools/gpu-bundle.sh}"
[[ -x "$bundler" ]] || { echo "make_gpu_bundle.sh: no bundler at $bundler (set GPU_BUNDLER)" >&2; exit 66; }
build/train --version | grep -q "CUDA backend: built in" ||
  { echo "make_gpu_bundle.sh: build/train has no CUDA backend: run scripts/setup.sh on a machine with the CUDA toolkit" >&2; exit 1; }
cmake --build build -j"$(nproc)" --target train gpu_kernel_check gpu_nccl_check gpu_step_check gpu_infer gpu_step_bench
for folder in .gpu-bundle .gpu-data; do
  grep -qx "/$folder/" .git/info/exclude 2>/dev/null || echo "/$folder/" >> .git/info/exclude
done
# A fresh folder: leftovers of an older bundle would be carried too (the device tool carries 64 MiB at most).
rm -rf .gpu-bundle
"$bundler" -o .gpu-bundle build/train build/tests/gpu/gpu_kernel_check build/tests/gpu/gpu_nccl_check \
  build/tests/gpu/gpu_step_check build/tests/gpu/gpu_infer build/scripts/bench/gpu_step_bench
mkdir -p .gpu-data
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
/usr/bin/python3 scripts/make_fashion_mnist_folder.py --limit 12000 "$scratch/fashion" > /dev/null
tar czf .gpu-data/fashion.tgz.tmp -C "$scratch" fashion && mv .gpu-data/fashion.tgz.tmp .gpu-data/fashion.tgz
echo "make_gpu_bundle.sh: .gpu-bundle ($(du -sh .gpu-bundle | cut -f1)) and .gpu-data ($(du -sh .gpu-data | cut -f1));"
echo "  on the GPU machine: bash scripts/gpu_check.sh --bundle .gpu-bundle --data .gpu-data/fashion.tgz"
