#!/usr/bin/env python3
"""Namespaces follow folders (docs/architecture.md), checked on every source file of the tree.

Each folder's code is in its folder's namespace: runtime/comm in train::comm, kernels/cuda in
train::kernels::cuda, and so on (FOLDERS below). A file may also open a namespace nested in its folder's
(track ids, detail, exit codes), but not one that is another folder's (a file of runtime/ in train::comm).
Named namespaces are followed by their opening "namespace NAME {" and closing "}  // namespace NAME" lines,
as every file writes them (anonymous ones change no name and are not followed). Prints every namespace that
breaks the rule and exits 1; prints what it checked and exits 0 otherwise.
"""
import os
import re
import sys

from source_tree import report, root_from_argv, source_files

ROOT = root_from_argv(__file__)

# Longest prefix first. kernels/cpu defines the ops that kernels/ops.h declares, so it is train::kernels.
FOLDERS = [
    ("runtime/data/", "train::data"),
    ("runtime/model_io/", "train::model_io"),
    ("runtime/comm/", "train::comm"),
    ("runtime/model/", "train::model"),
    ("runtime/timeline/", "train::timeline"),
    ("runtime/", "train"),
    ("kernels/cuda/", "train::kernels::cuda"),
    ("kernels/cpu/", "train::kernels"),
    ("kernels/", "train::kernels"),
    ("entrypoint/user_code/", "train::user_code"),
    ("entrypoint/", "train"),
    ("job/", "train"),
    ("common/", "train"),
]
FOLDER_NAMESPACES = {namespace for _, namespace in FOLDERS}
OPEN = re.compile(r"^\s*namespace\s+([A-Za-z_][\w:]*)\s*\{")
CLOSE = re.compile(r"^\s*\}\s*//\s*namespace\s+([A-Za-z_][\w:]*)")


def fits(namespace, expected):
    """The folder's namespace, or one nested in it that is no other folder's."""
    if namespace == expected:
        return True
    if not namespace.startswith(expected + "::"):
        return False
    return not any(other != expected and other.startswith(expected + "::") and
                   (namespace == other or namespace.startswith(other + "::")) for other in FOLDER_NAMESPACES)


def main():
    problems, checked = [], 0
    for prefix, _ in FOLDERS:
        if not os.path.isdir(os.path.join(ROOT, prefix)):
            problems.append(f"{prefix} is named in tests/build/test_namespaces.py but is no folder of the tree")
    tops = {prefix.split("/")[0] for prefix, _ in FOLDERS}
    for path in source_files(ROOT, tops):
        expected = next(namespace for prefix, namespace in FOLDERS if path.startswith(prefix))
        stack = []
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                opened, closed = OPEN.match(line), CLOSE.match(line)
                if opened:
                    stack.append(opened.group(1))
                    checked += 1
                    namespace = "::".join(stack)
                    if not fits(namespace, expected):
                        problems.append(f"{path}:{number}: namespace {namespace}: {path.rsplit('/', 1)[0]}/ is "
                                        f"{expected} (namespaces follow folders: docs/architecture.md)")
                elif closed:
                    if not stack or stack[-1] != closed.group(1):
                        problems.append(f"{path}:{number}: closes namespace {closed.group(1)}, but the one "
                                        f"open is {stack[-1] if stack else 'none'}")
                    else:
                        stack.pop()
        if stack:
            problems.append(f"{path}: namespace {stack[-1]} is not closed by a \"}}  // namespace {stack[-1]}\" line")
    return report("namespaces", problems, f"{len(problems)} problems in {checked} namespaces opened",
                  f"all {checked} namespaces opened in {', '.join(sorted(tops))} follow their folders")


if __name__ == "__main__":
    sys.exit(main())
