#!/usr/bin/env bash
# scripts/gpu/gpu_bundle_run.sh: runs a program of a GPU bundle (make_gpu_bundle.sh) on a GPU machine that
# has the NVIDIA driver, cuDNN 9 / cuBLAS 13 / NCCL 2 (in /usr/local/cuda, the system's library folders, or
# only inside Python's `nvidia-*` packages, as PyTorch installs them), Open MPI 4.1 and glibc, and nothing
# of ours. make_gpu_bundle.sh copies it into the bundle as run.sh:
#
#   bash BUNDLE/run.sh PROGRAM [ARGS...]            PROGRAM: a file name from the bundle (train, gpu_step_check, ...)
#   bash BUNDLE/run.sh mpirun [MPIRUN ARGS...]      the machine's own mpirun, the libraries passed to every rank
#   bash BUNDLE/run.sh compute-sanitizer [ARGS...]  the bundle's compute-sanitizer (from PyPI's wheel)
#   bash BUNDLE/run.sh --check                      says where each library comes from and its version (asked
#                                                   of the library itself), the programs' unresolved libraries,
#                                                   mpirun's and compute-sanitizer's versions; exit 127 when one
#                                                   is missing
#
# The bundle is unpacked on first use into /tmp/gpu-bundle/ID (ID: bundle.tgz's size and time), outside the
# bundle's folder, so that a bundle run here once still carries only its archives. A library nobody provides is
# named, with where it was looked for, instead of a loader error from deep inside a rank. Run as
# scripts/gpu/gpu_bundle_run.sh --check (no bundle.tgz beside it), it reports the machine's libraries alone
# (gpu_check.sh on a machine that builds).
set -u
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=/nonexistent
if [[ -f $dir/bundle.tgz ]]; then
  root=/tmp/gpu-bundle/$(stat -c %s-%Y "$dir/bundle.tgz")
  if [[ ! -f $root/.complete ]]; then
    rm -rf "$root.tmp" && mkdir -p "$root.tmp" && tar xzf "$dir/bundle.tgz" -C "$root.tmp" &&
      touch "$root.tmp/.complete" && rm -rf "$root" && mv "$root.tmp" "$root" ||
      { echo "run.sh: cannot unpack $dir/bundle.tgz into $root" >&2; exit 1; }
  fi
fi

# Where the machine keeps CUDA's libraries: Python's nvidia packages first (what PyTorch uses), then the
# toolkit and the system's folders.
roots=()
for python in python3 python; do
  command -v "$python" >/dev/null 2>&1 || continue
  while IFS= read -r path; do [[ -d $path ]] && roots+=("$path"); done < <(
    "$python" -c 'import nvidia, sys; print("\n".join(nvidia.__path__))' 2>/dev/null)
  break
done
roots+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu
        /usr/lib64 /usr/local/lib)
needed=(libcudnn.so.9 libcublas.so.13 libcublasLt.so.13 libnccl.so.2)
found=""
found_paths=()
missing=()
for library in "${needed[@]}"; do
  path=""
  for where in "${roots[@]}"; do
    path=$(find "$where" -maxdepth 4 -name "$library" 2>/dev/null | head -n 1)
    [[ -n $path ]] && break
  done
  if [[ -z $path ]]; then
    missing+=("$library")
  else
    folder=$(dirname "$path")
    case ":$found:" in *":$folder:"*) ;; *) found="${found:+$found:}$folder" ;; esac
    found_paths+=("$path")
  fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "run.sh: not found on this machine: ${missing[*]} (looked in: ${roots[*]}); install the CUDA 13 libraries" \
       "(e.g. pip install nvidia-cudnn-cu13 nvidia-cublas nvidia-nccl-cu13) or point LD_LIBRARY_PATH at them" >&2
  exit 127
fi
# compute-sanitizer: the machine's own when it has one (a whole CUDA toolkit's, matching its driver), else the
# bundle's (NVIDIA's PyPI wheel). Looked up before the bundle's folders join PATH.
sanitizer=""
for candidate in "$(command -v compute-sanitizer 2>/dev/null)" /usr/local/cuda/bin/compute-sanitizer \
                 /usr/local/cuda/compute-sanitizer/compute-sanitizer "$root/sanitizer/compute-sanitizer"; do
  if [[ -n $candidate && -x $candidate ]]; then sanitizer=$candidate; break; fi
done
export LD_LIBRARY_PATH="$root/lib:$found${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$root/bin:$PATH"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
case "${1:-}" in
  --check)
    # Each library's version from its own API (cudnnGetVersion, cublasLtGetVersion, ncclGetVersion).
    python3 - "${found_paths[@]}" <<'PY' 2>&1 || printf '%s: (version unknown: no python3)\n' "${found_paths[@]}"
import ctypes, os, sys
for path in sys.argv[1:]:
    name, version = os.path.basename(path), "version unknown"
    try:
        library = ctypes.CDLL(path)
        if name.startswith("libcudnn"):
            library.cudnnGetVersion.restype = ctypes.c_size_t
            number = library.cudnnGetVersion()
            version = f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
        elif name.startswith("libcublas"):  # cuBLAS and cuBLASLt are one release
            library = ctypes.CDLL(path.replace("libcublas.", "libcublasLt."))
            library.cublasLtGetVersion.restype = ctypes.c_size_t
            number = library.cublasLtGetVersion()
            version = f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
        elif name.startswith("libnccl"):
            number = ctypes.c_int()
            if library.ncclGetVersion(ctypes.byref(number)) == 0:
                value = number.value
                version = f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    except (OSError, AttributeError) as error:
        version = f"version unknown: {error}"
    print(f"{name}: {path} ({version})")
PY
    for program in "$root"/bin/*; do
      [[ -e $program ]] || continue
      unresolved=$(ldd "$program" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
      if [[ -n $unresolved ]]; then echo "$(basename "$program"): unresolved: $unresolved"; missing+=(x); fi
    done
    command -v mpirun >/dev/null 2>&1 && echo "mpirun: $(command -v mpirun) ($(mpirun --version 2>&1 | head -n 1))" ||
      { echo "mpirun: not found"; missing+=(mpirun); }
    if [[ -n $sanitizer ]]; then
      where="the machine's own"; [[ $sanitizer == "$root"/* ]] && where="the bundle's"
      echo "compute-sanitizer: $sanitizer, $where ($("$sanitizer" --version 2>&1 | grep -m1 -i version))"
    fi
    [[ -x $root/bin/train ]] && echo "train: $("$root/bin/train" --version 2>&1 | head -n 1)"
    [[ ${#missing[@]} -eq 0 ]] && echo "run.sh: every program's libraries resolve" || exit 127
    exit 0 ;;
  "") sed -n '2,13p' "$0"; exit 64 ;;
  compute-sanitizer)
    shift
    [[ -n $sanitizer ]] || { echo "run.sh: no compute-sanitizer on this machine or in the bundle" >&2; exit 127; }
    exec "$sanitizer" "$@" ;;
  mpirun) shift; exec mpirun -x LD_LIBRARY_PATH -x PATH -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM "$@" ;;
esac
exec "$@"
