#!/usr/bin/env bash
# scripts/gpu/make_gpu_bundle.sh [--print-build-dir] [OUT]: everything gpu_check.sh (beside it) needs on a GPU machine
# that cannot build the project (it has the NVIDIA driver, CUDA's libraries, possibly only inside Python's
# nvidia-* packages, Open MPI 4.1 and glibc, and nothing of ours), in one folder OUT (default .gpu-bundle in
# this checkout, which .gitignore leaves out):
#   OUT/bundle.tgz    train, the GPU check and benchmark programs, the shared libraries they need that are
#                     neither CUDA's, MPI's nor glibc's, and compute-sanitizer (NVIDIA's PyPI wheel)
#   OUT/run.sh        scripts/gpu/gpu_bundle_run.sh: finds CUDA's libraries on that machine and runs a program
#   OUT/fashion.tgz   12,000 training and 10,000 validation Fashion-MNIST images as an image folder
#   OUT/references/   the CPU's side of the training checks, computed here with this build's train (device=cpu)
#                     on that data (scripts/gpu/gpu_training_check.py --make-references: the accuracy job's top-1
#                     for each of its seeds, one after another, the longest part; the two-rank jobs' samples,
#                     losses and tensor digests), made again only
#                     when train, the data or gpu_training_check.py changed
#   OUT/made.txt      when, from which commit, and the references' summary (gpu_check.sh's record quotes it)
# It works from any clone or copy of the repository: it builds in this checkout's build/ only when that was
# configured from this checkout (a build/ copied from elsewhere is left alone: build-gpu/ is configured here
# instead), and finds its helpers beside itself. It prints the bundle's size and fails above 60 MiB (the device
# tool carries at most 64 MiB with the repository). Then, on the GPU machine, from a copy of the repository with
# OUT (docs/gpu.md's "Checking it on a GPU"):
#   bash scripts/gpu/gpu_check.sh --bundle OUT proof LOGDIR     then rest: each group within 360 s
# --print-build-dir: only say which build folder would be used, and why (nothing is built).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
print_only=0
if [[ ${1:-} == --print-build-dir ]]; then print_only=1; shift; fi
out="${1:-$repo/.gpu-bundle}"
programs=(train gpu_kernel_check gpu_nccl_check gpu_step_check gpu_infer gpu_step_bench)
# The first of NVIDIA's sanitizer wheels whose compute-sanitizer is whole: 13.0.85 to 13.4 leave out
# TreeLauncherSubreaper, which compute-sanitizer starts every target through ("Target application terminated
# before first instrumented API call", seen on an H200 on 2026-11-27). run.sh prefers the machine's own.
sanitizer_version=13.5.25

# The build folder: this checkout's own build/ (configured by scripts/setup.sh), never one whose cache
# belongs to another checkout (building there would re-run CMake over that checkout's sources).
configured_here() {  # folder
  [[ -f "$1/CMakeCache.txt" ]] || return 1
  local home
  home="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$1/CMakeCache.txt")"
  [[ -n "$home" && "$(cd "$home" 2>/dev/null && pwd -P)" == "$(pwd -P)" ]]
}
if configured_here build; then
  build=build; why="build/ was configured from this checkout"
elif [[ -f build/CMakeCache.txt ]]; then
  build=build-gpu; why="build/ belongs to another checkout ($(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build/CMakeCache.txt)); using build-gpu/"
else
  build=build-gpu; why="this checkout has no build/; using build-gpu/"
fi
if [[ $print_only -eq 1 ]]; then echo "$build ($why)"; exit 0; fi
echo "make_gpu_bundle.sh: building in $build ($why)"
if [[ $build == build-gpu ]] && ! configured_here build-gpu; then
  [[ -x /usr/local/cuda/bin/nvcc ]] || command -v nvcc >/dev/null ||
    { echo "make_gpu_bundle.sh: no CUDA toolkit (nvcc) here: build the bundle on a machine with one" >&2; exit 1; }
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER="/usr/bin/env;CCACHE_BASEDIR=$repo;ccache"
              -DCMAKE_CXX_COMPILER_LAUNCHER="/usr/bin/env;CCACHE_BASEDIR=$repo;ccache"
              -DCMAKE_CUDA_COMPILER_LAUNCHER="/usr/bin/env;CCACHE_BASEDIR=$repo;ccache")
  fi
  cmake -S "$repo" -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAIN_CUDA=ON "${launcher[@]}" > /dev/null
fi
cmake --build "$build" -j"$(nproc)" --target train gpu_kernel_check gpu_nccl_check gpu_step_check gpu_infer gpu_step_bench
"$build/train" --version | grep -q "CUDA backend: built in" ||
  { echo "make_gpu_bundle.sh: $build/train has no CUDA backend (no CUDA toolkit when it was configured)" >&2; exit 1; }
paths=("$build/train" "$build/tests/gpu/gpu_kernel_check" "$build/tests/gpu/gpu_nccl_check"
       "$build/tests/gpu/gpu_step_check" "$build/tests/gpu/gpu_infer" "$build/scripts/bench/gpu_step_bench")

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp "${paths[@]}" "$stage/bin/"
# Libraries the GPU machine has (or must have) of its own: glibc, the C++ runtime, CUDA's, MPI's, the driver.
system='linux-vdso|ld-linux|/libc\.so|/libm\.so|/libpthread|/libdl\.so|/librt\.so|libstdc\+\+|libgcc_s|libcuda\.so|libcudnn|libcublas|libnccl|libcudart|libmpi|libopen-|libpmix|libhwloc|libevent|libucx|libucp|libucs|libuct|libfabric|libibverbs|librdmacm|libnvidia|libz\.so|libudev'
# (grep finding none is fine: a build whose programs need only the system's libraries bundles none.)
for program in "$stage"/bin/*; do ldd "$program" | awk '/=> \//{print $3}'; done | { grep -vE "$system" || true; } | sort -u |
  while read -r library; do cp -L "$library" "$stage/lib/"; done
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/* 2>/dev/null || true

# compute-sanitizer: not part of the driver or of PyTorch's packages; NVIDIA ships it as a PyPI wheel.
cache="$build/gpu-bundle-cache"
mkdir -p "$cache"
cached_wheel() { ls "$cache"/nvidia_cuda_sanitizer_api-"$sanitizer_version"-*.whl 2>/dev/null | head -n 1 || true; }
wheel="$(cached_wheel)"
if [[ -z "$wheel" ]]; then
  python3 -m pip download --quiet --no-deps --dest "$cache" "nvidia-cuda-sanitizer-api==$sanitizer_version" ||
    { echo "make_gpu_bundle.sh: cannot download nvidia-cuda-sanitizer-api==$sanitizer_version from PyPI" >&2; exit 1; }
  wheel="$(cached_wheel)"
fi
# The wheel's compute-sanitizer folder (the tool, its launcher helpers and injection libraries side by side, as
# in a CUDA toolkit); its documents and the 32-bit targets' helpers (x86/) left out.
python3 - "$wheel" "$stage/sanitizer" <<'PY'
import os, sys, zipfile
wheel, target = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    for entry in archive.infolist():
        parts = entry.filename.split("/")
        if entry.is_dir() or parts[:3] != ["nvidia", "cu13", "compute-sanitizer"] or len(parts) != 4:
            continue
        path = os.path.join(target, parts[3])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with archive.open(entry) as source, open(path, "wb") as destination:
            destination.write(source.read())
        os.chmod(path, 0o755)
PY
for tool in compute-sanitizer TreeLauncherSubreaper; do
  [[ -x "$stage/sanitizer/$tool" ]] ||
    { echo "make_gpu_bundle.sh: $wheel holds no nvidia/cu13/compute-sanitizer/$tool" >&2; exit 1; }
done

mkdir -p "$out"
tar czf "$out/bundle.tgz.tmp" -C "$stage" . && mv "$out/bundle.tgz.tmp" "$out/bundle.tgz"
cp "$here/gpu_bundle_run.sh" "$out/run.sh.tmp" && mv "$out/run.sh.tmp" "$out/run.sh"
rm -rf "$out/unpacked" "$out/unpacked.tmp"  # an older bundle's files would travel too
if [[ ! -f "$out/fashion.tgz" ]]; then
  data="$stage/fashion"
  /usr/bin/python3 "$repo/scripts/data/make_fashion_mnist_folder.py" --limit 12000 "$data" > /dev/null
  tar czf "$out/fashion.tgz.tmp" -C "$stage" fashion && mv "$out/fashion.tgz.tmp" "$out/fashion.tgz"
fi

# The CPU's side of the training checks, from this train on this data (kept while neither, nor the jobs and
# digests gpu_training_check.py defines, changed).
key="$( (cat "$build/train" "$out/fashion.tgz"; /usr/bin/python3 "$here/gpu_training_check.py" --references-key) |
       sha256sum | cut -c1-16)"
if [[ "$(cat "$out/references/key" 2>/dev/null)" != "$key" ]]; then
  echo "make_gpu_bundle.sh: the CPU's references (train device=cpu: the accuracy job for each of its seeds, one after another, and two two-rank jobs; minutes each)"
  rm -rf "$stage/fashion" "$out/references.tmp" && tar xzf "$out/fashion.tgz" -C "$stage"
  /usr/bin/python3 "$here/gpu_training_check.py" --make-references "$out/references.tmp" --data "$stage/fashion" \
    --train "$repo/$build/train" --work "$stage/references-work" > "$stage/references.log" 2>&1 ||
    { tail -n 20 "$stage/references.log" >&2; echo "make_gpu_bundle.sh: the CPU's references failed" >&2; exit 1; }
  echo "$key" > "$out/references.tmp/key"
  rm -rf "$out/references" && mv "$out/references.tmp" "$out/references"
  echo "make_gpu_bundle.sh: $(tail -n 1 "$stage/references.log")"
fi
summary="$(/usr/bin/python3 - "$out/references/references.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
a = r["accuracy"]
print("references made {} from {}: CPU top-1 mean {:.4f} over seeds {} (spread {:.4f}), {} steps each".format(
    r["made"], r["commit"], a["mean"], ", ".join(f"{s} {a['top1'][s]}" for s in a["seeds"]), a["spread"],
    a["steps"][a["seeds"][0]]))
PY
)"
echo "made $(date -u +%Y-%m-%dT%H:%MZ) from $(git -C "$repo" describe --always --dirty 2>/dev/null || echo 'an unknown commit'); $summary" > "$out/made.txt"

size=$(du -sb --apparent-size "$out" --exclude=unpacked | cut -f1)
echo "make_gpu_bundle.sh: $out: $((size / 1048576)) MiB in all (bundle.tgz $(du -h --apparent-size "$out/bundle.tgz" | cut -f1): ${programs[*]}, $(ls "$stage/lib" | wc -l) libraries, compute-sanitizer; fashion.tgz $(du -h --apparent-size "$out/fashion.tgz" | cut -f1); references $(du -sh --apparent-size "$out/references" | cut -f1))"
if [[ $size -gt $((60 * 1048576)) ]]; then
  echo "make_gpu_bundle.sh: $out is over 60 MiB: the device tool carries at most 64 MiB with the repository" >&2
  exit 1
fi
echo "  on the GPU machine: bash scripts/gpu/gpu_check.sh --bundle $(realpath --relative-to="$repo" "$out" 2>/dev/null || echo "$out") proof LOGDIR"
