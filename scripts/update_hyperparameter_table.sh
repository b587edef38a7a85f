#!/usr/bin/env bash
# Regenerates the hyperparameter table of docs/hyperparameters.md from the schema (`train hyperparameters`);
# tests/unit/docs/test_doc_tables.cpp fails until it is run after the schema changes.
set -euo pipefail
cd "$(dirname "$0")/.."
binary="${1:-build/train}"
python3 - "$binary" docs/hyperparameters.md <<'PY'
import os, subprocess, sys
binary, page = sys.argv[1], sys.argv[2]
table = subprocess.run([binary, "hyperparameters"], check=True, capture_output=True, text=True).stdout
text = open(page).read()
begin, end = "<!-- hyperparameters:begin -->\n", "<!-- hyperparameters:end -->"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
with open(page + ".tmp", "w") as out:  # whole or not at all
    out.write(head + begin + table + end + tail)
os.replace(page + ".tmp", page)
PY
