#!/usr/bin/env bash
# Runs the image the way SageMaker runs it, on this machine: a local /opt/ml holding a small real dataset
# (Fashion-MNIST from Debian's dataset-fashion-mnist) and a one-host job, then `docker run ... IMAGE train`
# (Podman when there is no Docker), on all GPUs when nvidia-smi sees one. Prints where the model, the
# report files and the log are; exits with train's exit code.
#
#   scripts/smoke_test.sh [IMAGE]              IMAGE defaults to train:latest
#   SMOKE_DIR=DIR SMOKE_LIMIT=N SMOKE_EPOCHS=E SMOKE_ENGINE=docker|podman scripts/smoke_test.sh IMAGE
#
# Build the image first: docker build -f docker/Dockerfile -t train .
set -euo pipefail
cd "$(dirname "$0")/.."

image="${1:-train:latest}"
limit="${SMOKE_LIMIT:-2000}"     # images per split: a minute or two on a CPU, seconds on a GPU
epochs="${SMOKE_EPOCHS:-2}"
opt_ml="${SMOKE_DIR:-$(mktemp -d /tmp/train-smoke.XXXXXX)}"
name="train-smoke-$$"

# Docker when its engine answers (a docker client alone is not enough), else Podman; SMOKE_ENGINE overrides.
if [ -n "${SMOKE_ENGINE:-}" ]; then engine="$SMOKE_ENGINE"
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then engine=docker
elif command -v podman >/dev/null; then engine=podman
else echo "smoke_test.sh: no Docker engine answers and podman is not installed" >&2; exit 1; fi
if ! "$engine" image inspect "$image" >/dev/null 2>&1; then
  echo "smoke_test.sh: no image $image here; build it: $engine build -f docker/Dockerfile -t ${image%:*} ." >&2
  exit 1
fi

# A container left behind by an interrupted run would keep its name and the GPUs.
cleanup() { "$engine" rm --force "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "smoke_test.sh: job directory $opt_ml (the container's /opt/ml)"
mkdir -p "$opt_ml/input/config" "$opt_ml/model" "$opt_ml/output" "$opt_ml/checkpoints"
if [ ! -d "$opt_ml/input/data/train" ]; then
  python3 scripts/data/make_fashion_mnist_folder.py "$opt_ml/input/data" --limit "$limit"
fi
cat > "$opt_ml/input/config/resourceconfig.json" <<JSON
{"current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "eth0"}
JSON
cat > "$opt_ml/input/config/inputdataconfig.json" <<JSON
{"train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"},
 "validation": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"}}
JSON
# Strings, as SageMaker passes them. ResNet-18 at the data's own 28x28: a smoke test, not a benchmark.
cat > "$opt_ml/input/config/hyperparameters.json" <<JSON
{"num_layers": "18", "image_shape": "3,28,28", "epochs": "$epochs", "mini_batch_size": "64",
 "learning_rate": "0.1", "augmentation_type": "none"}
JSON

run_args=(--name "$name" --hostname algo-1 --shm-size 1g -v "$opt_ml:/opt/ml")
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "smoke_test.sh: GPUs found: $(nvidia-smi -L | grep -c '^GPU')"
  if [ "$engine" = docker ]; then run_args+=(--gpus all); else run_args+=(--device nvidia.com/gpu=all); fi
fi
if [ "$engine" = podman ]; then
  # Podman's default ulimits can exceed this host's hard limits, which makes runc refuse to start the
  # container (docs/architecture.md, "Containers on a machine without Docker"): ask for no more than the host allows, and no more than train needs.
  nofile="$(ulimit -Hn)"; nproc="$(ulimit -Hu)"
  if [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; then nofile=65536; fi
  if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
  run_args+=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
fi

echo "smoke_test.sh: $engine run ${run_args[*]} $image train"
set +e
"$engine" run "${run_args[@]}" "$image" train 2>&1 | tee "$opt_ml/output/train.log"
code="${PIPESTATUS[0]}"
set -e

echo
echo "smoke_test.sh: train exited with code $code"
echo "  log:     $opt_ml/output/train.log"
if [ -f "$opt_ml/model/model.safetensors" ]; then
  echo "  model:   $opt_ml/model/model.safetensors (and model.json)"
fi
if [ -f "$opt_ml/output/success" ]; then echo "  success: $opt_ml/output/success"; fi
if [ -f "$opt_ml/output/failure" ]; then echo "  failure: $opt_ml/output/failure: $(head -n 1 "$opt_ml/output/failure")"; fi
exit "$code"
