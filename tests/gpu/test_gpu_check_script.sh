#!/usr/bin/env bash
# The GPU check's scripts without a GPU, so that a GPU loan is not spent on their own mistakes:
# scripts/gpu/gpu_check.sh lists its groups and dry-runs both (from this build and from a bundle's layout); each
# group's budgets add up to at most 360 s in the worst case (tests/gpu/check_gpu_budgets.py, which first checks
# that it refuses a listing over the limit); the checks are the issue's, in its order; bad usage is refused (64)
# and a real run here says "no GPU" (2); scripts/gpu/make_gpu_bundle.sh picks this checkout's build/ and never
# one configured from another checkout.
#   tests/gpu/test_gpu_check_script.sh REPO [--built]
# --built: this build has the GPU programs (a CUDA build): every program the dry runs name must exist.
set -uo pipefail
repo="$(cd "${1:?usage: test_gpu_check_script.sh REPO [--built]}" && pwd)"
built=0
[[ ${2:-} == --built ]] && built=1
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect_code() {  # expected, description, command...
  local expected="$1" what="$2"; shift 2
  "$@" > "$scratch/out" 2>&1
  local code=$?
  [[ $code -eq $expected ]] || { fail "$what: exit $code, expected $expected"; sed 's/^/    /' "$scratch/out" | tail -n 8; }
}
python=/usr/bin/python3

check="$repo/scripts/gpu/gpu_check.sh"
groups="$(bash "$check" --list | awk '{print $1}' | tr '\n' ' ')"
[[ "$groups" == "proof rest " ]] || fail "--list gave groups '$groups'"

for group in proof rest; do
  expect_code 0 "dry run of $group from build/" bash "$check" --dry-run "$group" "$scratch/dry-$group"
  cp "$scratch/out" "$scratch/$group.listing"
  # The worst case within 360 s, by arithmetic of the test's own.
  "$python" "$repo/tests/gpu/check_gpu_budgets.py" --self-test < "$scratch/$group.listing" > "$scratch/budgets" 2>&1 ||
    { fail "$group: its budgets"; sed 's/^/    /' "$scratch/budgets"; }
  [[ -e $scratch/dry-$group/table.md ]] && fail "$group: a dry run wrote a table"
  # Every script the dry run names exists; with --built, every program too.
  while read -r path; do [[ -f $path ]] || fail "$group: the dry run names $path, which does not exist"; done < <(
    grep -o "$repo/scripts/[^ ']*" "$scratch/$group.listing" | sort -u)
  if [[ $built -eq 1 ]]; then
    named=0
    while read -r path; do
      named=$((named + 1))
      [[ -x $path ]] || fail "$group: the dry run names $path, which is not built"
    done < <(grep -o "$repo/build/[^ ']*" "$scratch/$group.listing" | sort -u)
    [[ $named -ge 2 ]] || fail "$group: the dry run names only $named programs of build/"
  fi
done

# The issue's checks, most valuable first.
keys="$(grep -o '^check [0-9]* [^:]*' "$scratch/proof.listing" | awk '{print $3}' | tr '\n' ' ')"
[[ $keys == "machine data step accuracy two-ranks resume torchvision bench " ]] || fail "proof's checks: $keys"
listing="$scratch/proof.listing"
grep -q "would run: .*build/tests/gpu/gpu_step_check$" "$listing" || fail "proof does not run gpu_step_check"
grep -q "would run: .*gpu_training_check.py .*--checks accuracy " "$listing" || fail "proof has no accuracy check"
grep -q "would run: .*--checks resume .*--after-accuracy" "$listing" || fail "resume does not wait for accuracy's job"
grep -q "check 8 bench: budget [0-9]* s, after machine, alone" "$listing" || fail "proof's benchmark does not run alone"
grep -q "would run: .*gpu_step_bench.py .*--batches 256 .*--peers eager" "$listing" || fail "proof's benchmark"
listing="$scratch/rest.listing"
for key in kernels nccl-1 nccl-2 nccl-3 timeline-1 timeline-2 fast memcheck racecheck synccheck memcheck-train \
           compile-64 compile-128 compile-256 bench compile-64-timed compile-128-timed compile-256-timed; do
  grep -q "^check [0-9]* $key:" "$listing" || fail "rest has no check $key"
done
grep -q "would run: .*-np 3 .*gpu_nccl_check" "$listing" || fail "rest does not run 3 NCCL ranks"
grep -q "would run: .*--tool racecheck .*--case 'resnet18 b8 32x32'" "$listing" || fail "no racecheck of the step check"
grep -q "would run: SAGEMAKER_BASE_DIR=.* --tool memcheck .*--target-processes all .*train" "$listing" ||
  fail "no memcheck of a train job"
grep -q "would run: .*--peers compile --batches 128 --ready .*--go " "$listing" || fail "no torch.compile at batch 128"
grep -q "check [0-9]* compile-256-timed: budget [0-9]* s, after compile-256, alone" "$listing" ||
  fail "torch.compile at batch 256 is not timed alone"

# --only: the checks named and what they wait for.
expect_code 0 "--only torchvision" bash "$check" --dry-run --only torchvision proof "$scratch/only"
keys="$(grep -o '^check [0-9]* [^:]*' "$scratch/out" | awk '{print $3}' | tr '\n' ' ')"
[[ $keys == "machine data accuracy torchvision " ]] || fail "--only torchvision ran: $keys"
expect_code 0 "--only resume" bash "$check" --dry-run --only resume proof "$scratch/only"
keys="$(grep -o '^check [0-9]* [^:]*' "$scratch/out" | awk '{print $3}' | tr '\n' ' ')"
[[ $keys == "machine data accuracy resume " ]] || fail "--only resume (which compares with accuracy's job) ran: $keys"

# A bundle's layout (no libraries needed for a dry run): its programs, data and references.
mkdir -p "$scratch/bundle" && touch "$scratch/bundle/bundle.tgz" && cp "$repo/scripts/gpu/gpu_bundle_run.sh" "$scratch/bundle/run.sh"
expect_code 0 "dry run of rest from a bundle" bash "$check" --bundle "$scratch/bundle" --dry-run rest "$scratch/dry-bundle"
grep -q "run.sh mpirun .* gpu_nccl_check" "$scratch/out" || fail "the bundle's mpirun line does not name gpu_nccl_check on PATH"
grep -q "run.sh compute-sanitizer .* gpu_step_check --case" "$scratch/out" || fail "the bundle's sanitizer line"
expect_code 0 "dry run of proof from a bundle" bash "$check" --bundle "$scratch/bundle" --dry-run proof "$scratch/dry-bundle"
grep -q -- "--unpack $scratch/bundle/fashion.tgz" "$scratch/out" || fail "proof does not unpack the bundle's data"
grep -q -- "--references $scratch/bundle/references" "$scratch/out" || fail "proof does not use the bundle's references"

expect_code 64 "an unknown group" bash "$check" --dry-run nonsense "$scratch/x"
expect_code 64 "an old group" bash "$check" --dry-run model "$scratch/x"
expect_code 64 "no LOGDIR" bash "$check" proof
expect_code 64 "an unknown check for --only" bash "$check" --dry-run --only nonsense proof "$scratch/x"
expect_code 64 "a folder that is not a bundle" bash "$check" --bundle "$scratch" proof "$scratch/x"
if ! command -v nvidia-smi >/dev/null 2>&1; then
  expect_code 2 "a real run without a GPU" bash "$check" --bundle "$scratch/bundle" proof "$scratch/real"
  grep -q "no GPU visible" "$scratch/out" || fail "a real run without a GPU does not say so"
fi

# make_gpu_bundle.sh's build folder: this checkout's own, never another checkout's.
answer="$(bash "$repo/scripts/gpu/make_gpu_bundle.sh" --print-build-dir)"
[[ $answer == "build (build/ was configured from this checkout)" ]] || fail "in the checkout: '$answer'"
copy="$scratch/copy"
mkdir -p "$copy/scripts/gpu" "$copy/build"
cp "$repo/scripts/gpu/make_gpu_bundle.sh" "$repo/scripts/gpu/gpu_bundle_run.sh" "$copy/scripts/gpu/"
cp "$repo/build/CMakeCache.txt" "$copy/build/"
answer="$(bash "$copy/scripts/gpu/make_gpu_bundle.sh" --print-build-dir)"
[[ $answer == "build-gpu (build/ belongs to another checkout ($repo); using build-gpu/)" ]] || fail "in a copy: '$answer'"
rm -rf "$copy/build"
answer="$(bash "$copy/scripts/gpu/make_gpu_bundle.sh" --print-build-dir)"
[[ $answer == "build-gpu (this checkout has no build/; using build-gpu/)" ]] || fail "in a copy without build/: '$answer'"

if [[ $failures -eq 0 ]]; then echo "gpu_check.sh and make_gpu_bundle.sh: every check passed"; exit 0; fi
echo "$failures failure(s)"; exit 1
