#!/usr/bin/env bash
# Regenerates the README's hyperparameter table from the schema (`train hyperparameters`).
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:-build/train}"
python3 - "$binary" <<'PY'
import subprocess, sys
table = subprocess.run([sys.argv[1], "hyperparameters"], check=True, capture_output=True, text=True).stdout
text = open("README.md").read()
begin, end = "<!-- hyperparameters:begin -->\n", "<!-- hyperparameters:end -->"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open("README.md", "w").write(head + begin + table + end + tail)
PY
