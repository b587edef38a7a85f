#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and builds train: installs every Debian package the build and the
# tests need, then one build in build/: build/train (with the CUDA backend when a CUDA toolkit is
# present), build/cpu-only/train (CPU only, linked from the same objects), the tests and the GPU checks.
# Compiles go through ccache (installed here; CCACHE_DISABLE=1 turns it off). It prints one line per step
# and the build's progress; the full output of each step is in build/setup-*.log.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config
  ccache                              # compiler cache: a rebuild of unchanged sources takes seconds
  libopenmpi-dev openmpi-bin          # MPI for the ranks, mpirun for the launcher
  nlohmann-json3-dev libfmt-dev       # JSON parsing; formatting (used header-only, so linked in)
  libboost-random-dev                 # Boost.Random's ziggurat draws the initial weights (header-only)
  libjpeg62-turbo-dev libpng-dev zlib1g-dev  # JPEG (libjpeg-turbo's libjpeg API) and PNG decoding; gzip TFRecord shards
  dataset-fashion-mnist               # real data: scripts/data/make_fashion_mnist_folder.py makes an image folder of it
  catch2                              # unit tests
  libopenblas-dev                     # BLAS (sgemm/dgemm) behind the CPU kernels' matrix products
  clang libclang-rt-14-dev            # libFuzzer targets
  python3                             # launch tests drive the real binary from Python's unittest
  python3-torch python3-torchvision   # tests/python: model files must load in torchvision (and PyTorch parity)
  python3-matplotlib                  # scripts/timeline_png.py: a timeline drawn as a PNG (tests/training/test_timeline.py)
  procps util-linux iproute2          # ps/pgrep, unshare (PID-1 tests), ip
  openssh-server openssh-client       # sshd and ssh between hosts of multi-host jobs (scripts/simcluster.py)
  podman runc netavark aardvark-dns iptables debootstrap  # tests/container: build and run the image (no Docker, no registry)
  python3-venv python3-absl           # build-python/: TensorBoard's own reader for tests/training/test_reports.py
  python3-dev                         # build-toolkit/: sagemaker-training compiles its gethostname extension
  docker-compose                      # tests/sdk: the SageMaker SDK's local mode runs compose 1.29 against Podman
  python3-pip python3-boto3           # script mode: pip installs the code's requirements; boto3 fetches it from S3
)

mkdir -p build
started=$SECONDS
# Runs "$@" with its output in build/setup-$1.log; on failure shows the log's end and stops.
logged() {
  local log="build/setup-$1.log"
  shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "setup: FAILED: $* (the whole output: $log)" >&2
    exit 1
  fi
}
elapsed() { echo "$((SECONDS - started)) s"; }

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  logged apt-update $sudo apt-get update
  logged apt-install $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  echo "setup: packages installed ($(elapsed))"
fi

launcher=()
if command -v ccache >/dev/null; then
  # CCACHE_BASEDIR: paths below the checkout are hashed relative to it, so clones elsewhere share hits.
  ccache="/usr/bin/env;CCACHE_BASEDIR=$PWD;ccache"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER="$ccache" -DCMAKE_CXX_COMPILER_LAUNCHER="$ccache"
            -DCMAKE_CUDA_COMPILER_LAUNCHER="$ccache")
fi
echo "setup: configuring build/ (TRAIN_CUDA=${TRAIN_CUDA:-AUTO})"
logged configure cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAIN_CUDA="${TRAIN_CUDA:-AUTO}" \
  "${launcher[@]}"
grep '^-- train:' build/setup-configure.log | sed 's/^-- /setup: /'

# TensorBoard's reader reads train's event files back in the tests. Debian has no tensorboard package: PyPI's,
# pinned, in a venv over Debian's numpy and absl (its protobuf code wants a newer protobuf than Debian's).
if ! build-python/bin/python -c "import tensorboard.backend.event_processing.event_accumulator" 2>/dev/null; then
  echo "setup: installing TensorBoard's reader into build-python/"
  logged venv /usr/bin/python3 -m venv --system-site-packages build-python
  logged tensorboard build-python/bin/pip install --disable-pip-version-check --no-deps --ignore-installed \
    tensorboard==2.21.0 protobuf==6.31.1
fi

# The oracles of the SM_* variables and of a job as its user sees it, from PyPI (Debian has neither): the real
# SageMaker training toolkit (tests/toolkit) and the SageMaker Python SDK's local mode (tests/sdk), each in
# a venv of its own (their pins disagree: protobuf).
if ! build-toolkit/bin/python -c "import sagemaker_training.environment, sagemaker_training.mpi" 2>/dev/null; then
  echo "setup: installing the SageMaker training toolkit into build-toolkit/"
  logged toolkit-venv /usr/bin/python3 -m venv build-toolkit
  logged toolkit build-toolkit/bin/pip install --disable-pip-version-check sagemaker-training==5.1.4
fi
if ! build-sdk/bin/python -c "import sagemaker.local" 2>/dev/null; then
  echo "setup: installing the SageMaker Python SDK into build-sdk/"
  logged sdk-venv /usr/bin/python3 -m venv build-sdk
  logged sdk build-sdk/bin/pip install --disable-pip-version-check "sagemaker>=2.200,<3"
fi

# A local S3 (with IAM's access checks) for tests/user_code: moto's server mode from PyPI (Debian has no moto),
# in a venv of its own; only its S3 and IAM services and the server's Flask.
if ! build-moto/bin/python -c "import moto.server, moto.s3, moto.iam, flask_cors" 2>/dev/null; then
  echo "setup: installing moto's S3 server into build-moto/"
  logged moto-venv /usr/bin/python3 -m venv build-moto
  logged moto build-moto/bin/pip install --disable-pip-version-check "moto[s3,iam]==5.2.5" flask==3.1.3 \
    flask-cors==6.0.5
fi

jobs="${SETUP_JOBS:-$(nproc)}"
echo "setup: building build/ with $jobs jobs"
status=0
NINJA_STATUS="[%f/%t %e] " cmake --build build -j "$jobs" 2>&1 | tee build/setup-build.log |
  scripts/build_progress.sh || status=$?
if [ "$status" -ne 0 ]; then
  echo "setup: FAILED: the build (the whole output: build/setup-build.log)" >&2
  exit 1
fi
echo "setup: built ($(elapsed)): $(build/train --version); build/cpu-only/train: $(build/cpu-only/train --version)"
echo "setup: done; run the tests with: ctest --test-dir build --output-on-failure -j \"\$(nproc)\""
