"""What the tree checks of tests/build share: the repository root they check, its C++ and CUDA sources, and
how a check reports (every problem, then a count and exit code 1; or what it checked and 0)."""
import os
import sys

SOURCE = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")


def root_from_argv(script):
    """The repository root: the first argument, or the checkout that holds `script`."""
    return os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(script), "..", ".."))


def source_files(root, tops=None):
    """Repository-relative paths ("runtime/comm/x.cpp") of the sources below `root`, in a stable order, leaving
    out build folders and hidden ones; only below the top-level folders `tops` when given."""
    for directory, subdirs, files in os.walk(root):
        rel_dir = os.path.relpath(directory, root)
        top = rel_dir.split(os.sep)[0]
        if rel_dir != "." and (top.startswith(("build", ".")) or (tops is not None and top not in tops)):
            subdirs[:] = []
            continue
        subdirs.sort()
        for name in sorted(files):
            if name.endswith(SOURCE) and (rel_dir != "." or tops is None):
                yield os.path.normpath(os.path.join(rel_dir, name)).replace(os.sep, "/")


def report(name, problems, failed, passed):
    """Prints every problem and `name: failed` (exit code 1), or `name: passed` (0)."""
    for problem in problems:
        print(problem)
    print(f"{name}: {failed if problems else passed}")
    return 1 if problems else 0
