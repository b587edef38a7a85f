#!/usr/bin/env bash
# The GPU check's scripts without a GPU, so that a GPU loan is not spent on their own mistakes:
# scripts/gpu/gpu_check.sh lists its groups, dry-runs every one of them (from this build and from a bundle's
# layout), refuses bad usage (64) and says "no GPU" (2) when asked to run for real here;
# scripts/gpu/make_gpu_bundle.sh picks this checkout's build/ and never one configured from another checkout.
#   tests/gpu/test_gpu_check_script.sh REPO
set -uo pipefail
repo="$(cd "${1:?usage: test_gpu_check_script.sh REPO}" && pwd)"
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

check="$repo/scripts/gpu/gpu_check.sh"
groups="$(bash "$check" --list | awk '{print $1}' | tr '\n' ' ')"
[[ "$groups" == "model nccl train sanitize bench " ]] || fail "--list gave groups '$groups'"

expect_code 0 "dry run of every group from build/" bash "$check" --dry-run all "$scratch/dry"
for group in model nccl train sanitize bench; do
  table="$scratch/dry/$group/table.md"
  [[ -f $table ]] || { fail "$group: no table.md"; continue; }
  rows=$(grep -c '| INFO | dry run |' "$table")
  [[ $rows -ge 1 ]] || fail "$group: no check rows in its table"
done
bash "$check" --dry-run all "$scratch/dry2" > "$scratch/listing" 2>&1
# Every program the dry run names is built, and every script it names exists.
named=0
while read -r path; do
  named=$((named + 1))
  [[ -x $path ]] || fail "the dry run names $path, which is not built"
done < <(grep -o "$repo/build/[^ ']*" "$scratch/listing" | sort -u)
[[ $named -ge 5 ]] || fail "the dry run names only $named programs of build/"
while read -r path; do [[ -f $path ]] || fail "the dry run names $path, which does not exist"; done < <(
  grep -o "$repo/scripts/[^ ']*" "$scratch/listing" | sort -u)
grep -q "would run: .*build/tests/gpu/gpu_kernel_check" "$scratch/listing" || fail "the model group does not run gpu_kernel_check"
grep -q "would run: .*-np 3 .*gpu_nccl_check" "$scratch/listing" || fail "the nccl group does not run 3 ranks"
grep -q "would run: .*--checks two-ranks,timeline" "$scratch/listing" || fail "the nccl group does not run the two-rank check"
grep -q "would run: .*--tool racecheck .*--case 'resnet18 b8 32x32'" "$scratch/listing" || fail "no racecheck of the step check"
grep -q "would run: .*--tool synccheck --target-processes all .*train" "$scratch/listing" || fail "no synccheck of a train job"

# A bundle's layout (no libraries needed for a dry run).
mkdir -p "$scratch/bundle" && touch "$scratch/bundle/bundle.tgz" && cp "$repo/scripts/gpu/gpu_bundle_run.sh" "$scratch/bundle/run.sh"
expect_code 0 "dry run from a bundle" bash "$check" --bundle "$scratch/bundle" --dry-run nccl "$scratch/dry-bundle"
grep -q "run.sh mpirun .* gpu_nccl_check" "$scratch/out" || fail "the bundle's mpirun line does not name gpu_nccl_check on PATH"

expect_code 64 "an unknown group" bash "$check" --dry-run nonsense "$scratch/x"
expect_code 64 "no LOGDIR" bash "$check" model
expect_code 64 "a bad budget" bash "$check" --budget soon model "$scratch/x"
expect_code 64 "a folder that is not a bundle" bash "$check" --bundle "$scratch" model "$scratch/x"
if ! command -v nvidia-smi >/dev/null 2>&1; then
  expect_code 2 "a real run without a GPU" bash "$check" model "$scratch/real"
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
