#!/usr/bin/env bash
# scripts/gpu/gpu_check.sh: the GPU checks, in groups that each fit in one command on a lent GPU machine (a
# command there may run 10 minutes; each group keeps to a budget of 8 by default). CI has no GPU: it builds
# the programs and dry-runs this script (tests/gpu/test_gpu_check_script.sh).
#
#   scripts/gpu/gpu_check.sh --list
#   scripts/gpu/gpu_check.sh [--bundle DIR] [--data FASHION] [--budget SECONDS] [--dry-run] GROUP LOGDIR
#
#   GROUP        one of the groups below, or `all` (every group in turn, each in LOGDIR/GROUP)
#   LOGDIR       where the group's table (LOGDIR/table.md) and each check's log go; made if missing
#   --bundle DIR the programs of a bundle (scripts/gpu/make_gpu_bundle.sh) on a machine that cannot build the
#                project; without it, this checkout's build/ (scripts/setup.sh on a machine with CUDA)
#   --data       a Fashion-MNIST image folder or .tgz of one (default: the bundle's fashion.tgz, else one made
#                from Debian's dataset-fashion-mnist)
#   --budget     seconds the group may take (default 480); a check still running when it is spent is stopped
#                and its row says so
#   --dry-run    print what the group would run, run nothing (no GPU needed)
#
# Groups (each row of a table is PASS, FAIL or INFO; docs/gpu.md's "Checking it on a GPU" has their times):
#   model     gpu_kernel_check (every CUDA op against the CPU reference, fp32 and bf16), gpu_step_check (a
#             whole training step of ResNet-50/18 against the CPU model), and gpu_step_check again with
#             TRAIN_FAST_PATH=1
#   nccl      gpu_nccl_check with 1, 2 and 3 ranks (ranks beyond the GPUs share them, each its own NCCL host
#             id: the socket transport), two ranks of `train` on one GPU against two CPU ranks, and the
#             timeline of a 1-rank and a 2-rank job on the GPU (gpu_training_check.py two-ranks,timeline)
#   train     `train` with device=cuda on Fashion-MNIST against device=cpu, SIGTERM and resume bit-identical,
#             checkpoints across devices, the model file in torchvision, TRAIN_FAST_PATH=1 byte for byte
#             (gpu_training_check.py)
#   sanitize  compute-sanitizer memcheck, racecheck and synccheck on the whole-step check at a small batch
#             (ResNet-18, batch 8, 32x32) and on a 5-step `train` job
#   bench     scripts/bench/gpu_step_bench.py: img/s and memory of the CUDA engine at batch 64/128/256
#             against PyTorch eager and torch.compile on the same GPU (INFO rows)
#
# Exit status: 0 when every check passed; 1 when any failed; 2 when no GPU is visible; 64 for usage errors.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
groups=(model nccl train sanitize bench)
declare -A purpose=(
  [model]="every CUDA op and a whole training step against the CPU model (reference and fast path)"
  [nccl]="the NCCL gradient buckets with 1-3 ranks, two train ranks on one GPU against two CPU ranks, timelines"
  [train]="train with device=cuda: accuracy vs CPU, resume, checkpoints across devices, torchvision, fast path"
  [sanitize]="compute-sanitizer memcheck, racecheck, synccheck: the step check and a 5-step train job"
  [bench]="img/s and memory at batch 64/128/256 against PyTorch eager and torch.compile"
)
usage() { sed -n '2,34p' "$0"; exit 64; }

bundle="" data="" budget=480 dry_run=0 positional=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --list) for g in "${groups[@]}"; do printf '%-9s %s\n' "$g" "${purpose[$g]}"; done; exit 0 ;;
    --bundle) [[ $# -ge 2 ]] || usage; bundle="$(cd "$2" 2>/dev/null && pwd)" || { echo "gpu_check.sh: no bundle folder $2" >&2; exit 64; }; shift 2 ;;
    --data) [[ $# -ge 2 ]] || usage; data="$2"; shift 2 ;;
    --budget) [[ $# -ge 2 && $2 =~ ^[0-9]+$ && $2 -gt 0 ]] || { echo "gpu_check.sh: --budget takes a whole number of seconds" >&2; exit 64; }; budget="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage ;;
    -*) echo "gpu_check.sh: unknown option '$1' (see --help)" >&2; exit 64 ;;
    *) positional+=("$1"); shift ;;
  esac
done
[[ ${#positional[@]} -eq 2 ]] || { echo "gpu_check.sh: expected GROUP LOGDIR (see --help, --list)" >&2; exit 64; }
group="${positional[0]}" logdir="${positional[1]}"
if [[ $group == all ]]; then
  status=0
  for g in "${groups[@]}"; do
    args=(--budget "$budget")
    [[ -n $bundle ]] && args+=(--bundle "$bundle")
    [[ -n $data ]] && args+=(--data "$data")
    [[ $dry_run -eq 1 ]] && args+=(--dry-run)
    bash "$0" "${args[@]}" "$g" "$logdir/$g"
    code=$?
    [[ $code -eq 2 ]] && exit 2
    [[ $code -ne 0 ]] && status=1
  done
  exit $status
fi
[[ -n "${purpose[$group]:-}" ]] || { echo "gpu_check.sh: no group '$group'; the groups: ${groups[*]} (or all)" >&2; exit 64; }
mkdir -p "$logdir" || exit 64
logdir="$(cd "$logdir" && pwd)"

# How programs run: from the bundle (its runner finds CUDA's libraries) or from this checkout's build.
if [[ -n $bundle ]]; then
  [[ -f $bundle/run.sh && -f $bundle/bundle.tgz ]] || { echo "gpu_check.sh: $bundle is not a bundle (run.sh, bundle.tgz)" >&2; exit 64; }
  program() { echo "bash $bundle/run.sh $1"; }
  [[ -z $data && -f $bundle/fashion.tgz ]] && data="$bundle/fashion.tgz"
else
  declare -A path_of=([train]="$repo/build/train" [gpu_kernel_check]="$repo/build/tests/gpu/gpu_kernel_check"
    [gpu_nccl_check]="$repo/build/tests/gpu/gpu_nccl_check" [gpu_step_check]="$repo/build/tests/gpu/gpu_step_check"
    [gpu_infer]="$repo/build/tests/gpu/gpu_infer" [gpu_step_bench]="$repo/build/scripts/bench/gpu_step_bench"
    [mpirun]="mpirun --allow-run-as-root" [compute-sanitizer]="compute-sanitizer")
  program() { echo "${path_of[$1]}"; }
fi
python=/usr/bin/python3
[[ -x $python ]] || python=python3

started=$SECONDS
rows=()
status=0
row() {  # name, PASS|FAIL|INFO, detail
  rows+=("$1|$2|$3")
  [[ "$2" == FAIL ]] && status=1
  return 0
}
# Runs one check with what is left of the budget, its output into LOGDIR/LOG; a row from its exit status.
# 2 from a check program means no GPU: the whole group stops.
check() {  # name, log file name, command...
  local name="$1" log="$logdir/$2"; shift 2
  if [[ $dry_run -eq 1 ]]; then echo "would run: $*  > $log"; row "$name" INFO "dry run"; return 0; fi
  local left=$((budget - (SECONDS - started)))
  if [[ $left -le 5 ]]; then row "$name" FAIL "not run: the group's ${budget} s budget is spent"; return 0; fi
  echo "== $name"
  local begun=$SECONDS
  timeout --kill-after=10 "$left" bash -c "$*" > "$log" 2>&1
  local code=$?
  tail -n 3 "$log"
  local took=$((SECONDS - begun)) ran_out=0
  [[ ($code -eq 124 || $code -eq 137) && $took -ge $((left - 1)) ]] && ran_out=1
  if [[ $code -eq 2 ]] && grep -q "no CUDA GPU visible\|no GPU visible" "$log"; then
    echo "gpu_check.sh: no GPU visible; nothing was checked" >&2; exit 2
  fi
  local summary
  summary="$(grep -E 'passed|PASS|FAIL' "$log" | tail -n 1 | tr -d '|' | cut -c1-160)"
  if [[ $ran_out -eq 1 ]]; then row "$name" FAIL "stopped after ${took} s: the group's budget ran out (log: $2)"
  elif [[ $code -eq 0 ]]; then row "$name" PASS "${summary:-exit 0}; ${took} s (log: $2)"
  else row "$name" FAIL "exit $code; $(grep -c FAIL "$log") FAIL lines; ${took} s (log: $2)"; fi
}
# The rows of gpu_training_check.py (CHECK|name|verdict|detail) from its log.
training_rows() {  # log file name
  [[ $dry_run -eq 1 ]] && return 0
  local found=0
  while IFS='|' read -r _ name verdict detail; do row "$name" "$verdict" "$detail"; found=1; done \
    < <(grep '^CHECK|' "$logdir/$1" 2>/dev/null)
  [[ $found -eq 1 ]] || row "train on the GPU ($1)" FAIL "no result (log: $1)"
}
ensure_data() {
  [[ -n $data ]] && return 0
  data="$logdir/fashion"
  [[ $dry_run -eq 1 ]] && return 0
  "$python" "$repo/scripts/data/make_fashion_mnist_folder.py" --limit 12000 "$data" > "$logdir/fashion.log" 2>&1 ||
    { row "Fashion-MNIST for the training checks" FAIL "no --data and none to convert here (fashion.log)"; data=""; return 1; }
}
# The data as a folder with train/ (a .tgz unpacked once into LOGDIR).
data_folder() {
  if [[ -d $data/train ]]; then echo "$data"; return 0; fi
  local unpacked="$logdir/fashion-data"
  if [[ $dry_run -eq 0 && ! -d $unpacked ]]; then mkdir -p "$unpacked" && tar xzf "$data" -C "$unpacked"; fi
  dirname "$(ls -d "$unpacked"/train "$unpacked"/*/train 2>/dev/null | head -n 1)" 2>/dev/null || echo "$unpacked"
}
# A program's name as the bundle's runner finds it on PATH (inside mpirun or compute-sanitizer), or its path.
inner() { program "$1" | sed 's/^bash .*run\.sh //'; }

echo "== GPU ($group: ${purpose[$group]})"
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus="$(nvidia-smi --list-gpus 2>/dev/null | wc -l)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader > "$logdir/gpu.txt" 2>&1
  cat "$logdir/gpu.txt"
fi
if [[ $dry_run -eq 0 && $gpus -lt 1 ]]; then echo "gpu_check.sh: no GPU visible; nothing was checked" >&2; exit 2; fi
if [[ -n $bundle && $dry_run -eq 0 ]]; then
  bash "$bundle/run.sh" --check > "$logdir/libraries.txt" 2>&1 ||
    { cat "$logdir/libraries.txt"; echo "gpu_check.sh: the bundle's programs cannot run here (libraries.txt)" >&2; exit 1; }
fi

training() { echo "$python $repo/scripts/gpu/gpu_training_check.py --data $data --train '$(program train)' --infer '$(program gpu_infer)'"; }
case "$group" in
  model)
    check "CUDA kernels vs CPU reference (gpu_kernel_check)" gpu_kernel_check.log "$(program gpu_kernel_check)"
    check "whole training step, GPU vs CPU (gpu_step_check)" gpu_step_check.log "$(program gpu_step_check)"
    check "fast path: whole training step, GPU vs CPU (TRAIN_FAST_PATH=1 gpu_step_check)" gpu_step_check_fast.log \
      "TRAIN_FAST_PATH=1 $(program gpu_step_check)"
    ;;
  nccl)
    for ranks in 1 2 3; do
      check "NCCL gradient buckets, $ranks rank(s) on $gpus GPU(s) (gpu_nccl_check)" "gpu_nccl_check_$ranks.log" \
        "$(program mpirun) --oversubscribe --bind-to none -np $ranks $(inner gpu_nccl_check)"
    done
    ensure_data && {
      check "two train ranks on one GPU vs two CPU ranks, and timelines (gpu_training_check.py two-ranks,timeline)" \
        two_ranks.log "$(training) --checks two-ranks,timeline --work $logdir/two-ranks"
      training_rows two_ranks.log
    }
    ;;
  train)
    ensure_data && {
      check "train on the GPU (gpu_training_check.py)" training.log \
        "$(training) --checks accuracy,resume,across,torchvision,fast --work $logdir/training"
      training_rows training.log
    }
    ;;
  sanitize)
    for tool in memcheck racecheck synccheck; do
      check "compute-sanitizer $tool: the whole-step check, ResNet-18 batch 8 32x32" "sanitize_step_$tool.log" \
        "$(program compute-sanitizer) --tool $tool --error-exitcode 99 --print-limit 20 $(inner gpu_step_check) --case 'resnet18 b8 32x32'"
    done
    ensure_data && folder="$(data_folder)" && for tool in memcheck racecheck synccheck; do
      job="$logdir/sanitize-job-$tool"
      if [[ $dry_run -eq 0 ]]; then
        rm -rf "$job" && mkdir -p "$job/input/config" "$job/input/data"
        ln -sfn "$folder/train" "$job/input/data/train"
        echo '{"num_layers": "18", "image_shape": "3,28,28", "mini_batch_size": "32", "max_steps": "5", "device": "cuda", "augmentation_type": "none"}' \
          > "$job/input/config/hyperparameters.json"
        echo '{"train": {"TrainingInputMode": "File"}}' > "$job/input/config/inputdataconfig.json"
      fi
      check "compute-sanitizer $tool: a 5-step train job (device=cuda)" "sanitize_train_$tool.log" \
        "SAGEMAKER_BASE_DIR=$job $(program compute-sanitizer) --tool $tool --target-processes all --error-exitcode 99 --print-limit 20 $(inner train)"
    done
    ;;
  bench)
    check "ResNet-50 step img/s vs PyTorch (gpu_step_bench.py)" gpu_step_bench.log \
      "$python $repo/scripts/bench/gpu_step_bench.py --ours '$(program gpu_step_bench)' --json $logdir/gpu_step_bench.json"
    [[ $dry_run -eq 0 && ${rows[-1]} == *"|PASS|"* ]] && rows[-1]="${rows[-1]/|PASS|/|INFO|}"
    ;;
esac

{
  echo "# gpu_check.sh $group ($(date -u +%Y-%m-%dT%H:%MZ), $((SECONDS - started)) s of a ${budget} s budget)"
  echo
  echo "GPU: $(cat "$logdir/gpu.txt" 2>/dev/null | head -n 1)"
  echo "commit: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "| check | result | detail |"
  echo "|---|---|---|"
  for entry in "${rows[@]}"; do
    IFS='|' read -r name verdict detail <<<"$entry"
    echo "| $name | $verdict | $detail |"
  done
} > "$logdir/table.md"
echo
cat "$logdir/table.md"
if [[ $dry_run -eq 1 ]]; then echo "gpu_check.sh: $group: dry run, nothing was run"
elif [[ $status -eq 0 ]]; then echo "gpu_check.sh: $group: all checks passed (logs in $logdir)"
else echo "gpu_check.sh: $group: FAILURES (logs in $logdir)" >&2; fi
exit $status
