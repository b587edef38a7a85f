"""The command line of a Python test file that ctest runs: the file's own options first (each required, each
a path to what it tests or runs with), then whatever unittest takes (a test name, -k PATTERN, -v)."""
import argparse
import os
import sys


def paths_and_unittest_argv(*options):
    """The paths given with each of `options` (e.g. "--train"), made absolute, in the order named; and the
    rest of the command line as unittest.main's argv."""
    parser = argparse.ArgumentParser()
    for option in options:
        parser.add_argument(option, required=True)
    args, rest = parser.parse_known_args()
    paths = [os.path.abspath(getattr(args, option.lstrip("-").replace("-", "_"))) for option in options]
    return paths, [sys.argv[0]] + rest
