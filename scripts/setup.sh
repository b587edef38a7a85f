#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and builds train: installs every Debian package the build and the
# tests need, then builds build/train (with the CUDA backend when a CUDA toolkit is present) and
# build-cpu/train (CPU only), so both variants are built on every run.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config
  libopenmpi-dev openmpi-bin          # MPI for the ranks, mpirun for the launcher
  nlohmann-json3-dev libfmt-dev       # JSON parsing; formatting (used header-only, so linked in)
  libjpeg62-turbo-dev libpng-dev zlib1g-dev  # JPEG (libjpeg-turbo's libjpeg API) and PNG decoding; gzip TFRecord shards
  dataset-fashion-mnist               # real data: scripts/make_fashion_mnist_folder.py makes an image folder of it
  catch2                              # unit tests
  libopenblas-dev                     # BLAS (sgemm/dgemm) behind the CPU kernels' matrix products
  clang libclang-rt-14-dev            # libFuzzer targets
  python3                             # launch tests drive the real binary from Python's unittest
  python3-torch python3-torchvision   # tests/python: model files must load in torchvision (and PyTorch parity)
  procps util-linux iproute2          # ps/pgrep, unshare (PID-1 tests), ip
  openssh-server openssh-client       # sshd and ssh between hosts of multi-host jobs (scripts/simcluster.py)
  podman runc netavark aardvark-dns iptables debootstrap  # tests/container: build and run the image (no Docker, no registry)
  python3-venv python3-absl           # build-python/: TensorBoard's own reader for tests/training/test_reports.py
)

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# TensorBoard's reader reads train's event files back in the tests. Debian has no tensorboard package: PyPI's,
# pinned, in a venv over Debian's numpy and absl (its protobuf code wants a newer protobuf than Debian's).
if ! build-python/bin/python -c "import tensorboard.backend.event_processing.event_accumulator" 2>/dev/null; then
  echo "setup: installing TensorBoard's reader into build-python/"
  /usr/bin/python3 -m venv --system-site-packages build-python
  build-python/bin/pip install -q --disable-pip-version-check --no-deps --ignore-installed \
    tensorboard==2.21.0 protobuf==6.31.1
fi

jobs="${SETUP_JOBS:-$(nproc)}"
echo "setup: building build/ (CUDA backend when a toolkit is found)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAIN_CUDA="${TRAIN_CUDA:-AUTO}"
cmake --build build -j "$jobs"
echo "setup: building build-cpu/ (CPU-only variant)"
cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAIN_CUDA=OFF -DBUILD_TESTING=OFF
cmake --build build-cpu -j "$jobs" --target train
build/train --version
build-cpu/train --version
echo "setup: done; run the tests with: ctest --test-dir build --output-on-failure"
