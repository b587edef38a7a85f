#!/usr/bin/env python3
"""Checks a group's budgets from `gpu_check.sh --dry-run GROUP` (its listing on stdin), with arithmetic of its own:
every check has a budget and an estimate; its worst-case window starts when what it waits for has ended (an
alone check: when every check before it has) and lasts its budget, as printed; the group's worst case is at
most LIMIT seconds (a lent machine's 15 minutes hold one group, a fix and a rerun).

    gpu_check.sh --dry-run proof LOGDIR | check_gpu_budgets.py [--limit 360] [--self-test]

Exit 0 when every budget adds up, 1 (saying what does not) otherwise. --self-test also feeds itself the same
listing with one check's budget raised past the limit, and a window misprinted, and expects both refused.
"""
import argparse
import re
import sys

LINE = re.compile(r"^check (\d+) (\S+): budget (\d+) s, after (\S+), (alone|beside others), worst case (\d+)-(\d+) s; "
                  r"estimate (.*)$")
TOTAL = re.compile(r"^total: (\d+) s")


def problems_of(listing, limit):
    checks, problems, total = [], [], None
    for line in listing.splitlines():
        match = LINE.match(line)
        if match:
            number, key, budget, after, how, start, end, estimate = match.groups()
            checks.append({"key": key, "budget": int(budget), "after": [] if after == "-" else after.split(","),
                           "alone": how == "alone", "start": int(start), "end": int(end), "estimate": estimate})
        elif TOTAL.match(line):
            total = int(TOTAL.match(line).group(1))
    if not checks:
        return ["no check lines in the listing"]
    ends = {}
    for check in checks:
        if not check["estimate"].strip():
            problems.append(f"{check['key']}: no estimate beside its budget")
        unknown = [key for key in check["after"] if key not in ends]
        if unknown:
            problems.append(f"{check['key']} waits for {unknown}, not listed before it")
        start = max((ends[key] for key in check["after"] if key in ends), default=0)
        if check["alone"]:
            start = max(ends.values(), default=0)
        if (check["start"], check["end"]) != (start, start + check["budget"]):
            problems.append(f"{check['key']}: printed worst case {check['start']}-{check['end']} s, but its budget and "
                            f"what it waits for give {start}-{start + check['budget']} s")
        ends[check["key"]] = start + check["budget"]
    worst = max(ends.values())
    if worst > limit:
        problems.append(f"the budgets add up to {worst} s in the worst case, more than {limit} s")
    if total != worst:
        problems.append(f"the listing's total ({total} s) is not the worst case ({worst} s)")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=360)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    listing = sys.stdin.read()
    problems = problems_of(listing, args.limit)
    if args.self_test and not problems:
        first = next(line for line in listing.splitlines() if LINE.match(line))
        raised = re.sub(r"budget (\d+) s", lambda m: f"budget {int(m.group(1)) + args.limit} s", first, count=1)
        if not problems_of(listing.replace(first, raised), args.limit):
            problems.append("self-test: a budget raised past the limit was not refused")
        shifted = re.sub(r"worst case (\d+)-", lambda m: f"worst case {int(m.group(1)) + 1}-", first, count=1)
        if not problems_of(listing.replace(first, shifted), args.limit):
            problems.append("self-test: a misprinted window was not refused")
    for problem in problems:
        print(f"FAIL: {problem}")
    if not problems:
        print(f"budgets add up: {max(int(m.group(7)) for m in map(LINE.match, listing.splitlines()) if m)} s of "
              f"{args.limit} s in the worst case")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
