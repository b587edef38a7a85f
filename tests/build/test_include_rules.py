#!/usr/bin/env python3
"""The dependency rule of docs/architecture.md, checked on every #include of the source tree.

Includes are written from the repository root and never climb with "../"; each folder may include only the
folders it depends on: common <- job <- entrypoint; common, job, kernels <- runtime (and inside runtime,
data and model_io need only common, comm needs job (and of kernels only kernels/cuda/cuda_check.h), model needs kernels, comm and model_io; timeline needs
job, comm, data and model but no engine; engine needs those, timeline and the training settings, and
nothing of the trainer). Every folder directly under runtime/ has its own rule: a new one fails the check
until it gets one. Inside
runtime/data each room includes only common, the shared files directly in runtime/data and the rooms it
uses: records and images stand alone, sources uses both, pipe uses records, loader uses sources and pipe;
of job, every room may include job/training_choices.h alone (the augmentation and format the job chose).
Only entrypoint/main.cpp may include the rank (runtime/rank_main.h). Prints every include that breaks a
rule and exits 1; prints what it checked and exits 0 otherwise.
"""
import os
import re
import sys

from source_tree import report, root_from_argv, source_files

ROOT = root_from_argv(__file__)

# Longest prefix first: the folder a file belongs to, and the top-level folders it may include from.
# A folder ending in "/*" allows only the files directly in it, not its subfolders.
DATA_SHARED = "runtime/data/*"
# The one file of job/ the data rooms take: the typed choices (augmentation, data format) the job made.
JOB_CHOICES = "job/training_choices.h"
# The one file of kernels/ comm takes: the one TRAIN_CUDA_CHECK (the NCCL reducer's stream and event calls).
CUDA_CHECK = "kernels/cuda/cuda_check.h"
RULES = [
    ("runtime/data/records/", {"common", DATA_SHARED, JOB_CHOICES, "runtime/data/records"}),
    ("runtime/data/images/", {"common", DATA_SHARED, JOB_CHOICES, "runtime/data/images"}),
    ("runtime/data/sources/", {"common", DATA_SHARED, JOB_CHOICES, "runtime/data/records", "runtime/data/images",
                               "runtime/data/sources"}),
    ("runtime/data/pipe/", {"common", DATA_SHARED, JOB_CHOICES, "runtime/data/records", "runtime/data/pipe"}),
    ("runtime/data/loader/", {"common", DATA_SHARED, JOB_CHOICES, "runtime/data/sources", "runtime/data/pipe",
                              "runtime/data/loader"}),
    ("runtime/data/", {"common", DATA_SHARED, JOB_CHOICES}),
    ("runtime/model_io/", {"common", "runtime/model_io"}),
    ("runtime/comm/", {"common", "job", CUDA_CHECK, "runtime/comm"}),
    ("runtime/model/", {"common", "kernels", "runtime/comm", "runtime/model_io", "runtime/model"}),
    ("runtime/timeline/", {"common", "job", "runtime/comm", "runtime/data", "runtime/model", "runtime/timeline"}),
    ("runtime/engine/", {"common", "job", "kernels", "runtime/comm", "runtime/data", "runtime/model",
                         "runtime/model_io", "runtime/timeline", "runtime/engine", "runtime/training_settings.h"}),
    ("runtime/", {"common", "job", "kernels", "runtime"}),
    ("entrypoint/", {"common", "job", "entrypoint"}),
    ("job/", {"common", "job"}),
    ("common/", {"common"}),
    ("kernels/", {"kernels"}),
]
EXCEPTIONS = {("entrypoint/main.cpp", "runtime/rank_main.h")}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def allowed(target, folders):
    def inside(folder):
        if folder.endswith("/*"):
            return os.path.dirname(target) == folder[:-2]
        return target == folder or target.startswith(folder + "/")
    return any(inside(f) for f in folders)


def main():
    problems, checked = [], 0
    runtime = os.path.join(ROOT, "runtime")
    for name in sorted(os.listdir(runtime)):
        if os.path.isdir(os.path.join(runtime, name)) and not any(prefix == f"runtime/{name}/" for prefix, _ in RULES):
            problems.append(f"runtime/{name}/ has no rule of its own in tests/build/test_include_rules.py: say "
                            f"which folders it may include (and write it into docs/architecture.md's rule)")
    for path in source_files(ROOT):
        prefix, rule = next(((prefix, folders) for prefix, folders in RULES if path.startswith(prefix)),
                            (None, None))
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                checked += 1
                target = match.group(1)
                where = f"{path}:{number}: #include \"{target}\""
                if target.startswith("../") or "/../" in target:
                    problems.append(f"{where} climbs with ../ (write includes from the repository root)")
                elif not os.path.exists(os.path.join(ROOT, target)):
                    problems.append(f"{where} names no file under the repository root")
                elif rule is not None and not allowed(target, rule) and (path, target) not in EXCEPTIONS:
                    problems.append(f"{where} breaks the dependency rule: {prefix} may include "
                                    f"only {', '.join(sorted(rule))} (docs/architecture.md)")
    return report("include rules", problems,
                  f"{len(problems)} of {checked} includes break the rules",
                  f"all {checked} includes are written from the root and follow the dependency rule")


if __name__ == "__main__":
    sys.exit(main())
