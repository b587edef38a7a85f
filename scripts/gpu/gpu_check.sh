#!/usr/bin/env bash
# scripts/gpu/gpu_check.sh: the GPU checks in two groups, proof and rest, each one command within 360 s on one
# H100 or H200 (scripts/gpu/gpu_check.py runs them; docs/gpu.md's "Checking it on a GPU" has the loan's
# sequence). CI has no GPU: it dry-runs both groups and checks their budgets (tests/gpu/test_gpu_check_script.sh).
#
#   bash scripts/gpu/gpu_check.sh --list
#   bash scripts/gpu/gpu_check.sh --help
#   bash scripts/gpu/gpu_check.sh [--bundle DIR] [--only KEYS] [--dry-run] proof|rest LOGDIR
#
# The Python it runs them with: the first of python3 (PATH) and /usr/bin/python3 that has numpy and PyTorch (the
# training checks read checkpoints with numpy; the model-file and speed checks need PyTorch), else the first with
# numpy, else python3.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
chosen=""
has() {  # python, modules...: whether it finds them (without importing: PyTorch takes seconds)
  "$1" -c 'import importlib.util, sys; sys.exit(not all(importlib.util.find_spec(m) for m in sys.argv[1:]))' "${@:2}" \
    >/dev/null 2>&1
}
for wanted in "numpy torch" "numpy" ""; do
  for candidate in python3 /usr/bin/python3; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    # shellcheck disable=SC2086 # the modules are words
    if has "$candidate" $wanted; then chosen="$candidate"; break 2; fi
  done
done
[[ -n $chosen ]] || { echo "gpu_check.sh: no python3 here" >&2; exit 64; }
exec "$chosen" "$here/gpu_check.py" "$@"
