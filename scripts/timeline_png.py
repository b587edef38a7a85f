#!/usr/bin/env python3
"""Draws a timeline of train (output/data/timeline/timeline.json, Chrome trace-event JSON) as a PNG Gantt chart:
one band per rank, one row per track (training thread, compute, buckets, loader threads), spans coloured by
what they count as in the summary (waiting for data, compute, exposed communication) or shown for detail.
Perfetto's UI (ui.perfetto.dev) shows the same file interactively; this is for a picture without a browser.

    /usr/bin/python3 scripts/timeline_png.py TIMELINE.json OUT.png [--steps 14-16] [--width 16]

--steps draws only the time of those steps (by rank 0's step spans). Needs Debian's python3-matplotlib.
"""
import argparse
import collections
import json
import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLOURS = {
    "step": "#e8e8e8",
    "data_wait": "#f2a541",
    "compute": "#4c78a8",
    "exposed_communication": "#e45756",
    "pause": "#b279a2",
    "host": "#c9d6e8",
    "detail": "#9ecae9",
}
BUCKET_COLOUR = "#54a24b"
LOADER_COLOUR = "#eeca3b"


def load(path):
    with open(path) as f:
        document = json.load(f)
    names, spans = {}, collections.defaultdict(list)
    processes = {}
    for event in document["traceEvents"]:
        if event["ph"] == "M" and event["name"] == "thread_name":
            names[(event["pid"], event["tid"])] = event["args"]["name"]
        elif event["ph"] == "M" and event["name"] == "process_name":
            processes[event["pid"]] = event["args"]["name"]
        elif event["ph"] == "X":
            spans[(event["pid"], event["tid"])].append(event)
    return processes, names, spans


def window(spans, steps):
    """The time of steps FIRST-LAST on rank 0 (its step spans, on the training thread or the GPU's stream)."""
    first, last = (int(v) for v in steps.split("-"))
    times = [(e["ts"], e["ts"] + e["dur"]) for (pid, _), events in spans.items() if pid == 0 for e in events
             if e["cat"] == "step" and first <= int(e["name"].split()[1]) <= last]
    if not times:
        sys.exit(f"no step spans {steps} on rank 0")
    return min(t[0] for t in times), max(t[1] for t in times)


def depth_of(events):
    """Nesting depth of each span on one track (0: outermost)."""
    depth, stack = {}, []
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
            stack.pop()
        depth[id(e)] = len(stack)
        stack.append(e)
    return depth


def colour(event, tid):
    if tid >= 10000:
        return LOADER_COLOUR
    if 100 <= tid < 10000:
        return BUCKET_COLOUR
    return COLOURS.get(event["cat"], "#cccccc")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--steps", help="FIRST-LAST: only these steps' time")
    parser.add_argument("--width", type=float, default=16)
    args = parser.parse_args()
    processes, names, spans = load(args.trace)
    start, end = window(spans, args.steps) if args.steps else (
        min(e["ts"] for events in spans.values() for e in events),
        max(e["ts"] + e["dur"] for events in spans.values() for e in events))
    rows = sorted(spans)  # by rank, then track
    figure, axes = plt.subplots(figsize=(args.width, 0.42 * len(rows) + 1.6))
    labels = []
    for row, key in enumerate(rows):
        y = len(rows) - 1 - row
        events = [e for e in spans[key] if e["ts"] + e["dur"] >= start and e["ts"] <= end]
        depth = depth_of(events)
        for e in sorted(events, key=lambda e: depth[id(e)]):  # parents first, children drawn over them
            d = min(depth[id(e)], 2)
            height = 0.8 - 0.25 * d
            left = (max(e["ts"], start) - start) / 1000.0
            width = (min(e["ts"] + e["dur"], end) - max(e["ts"], start)) / 1000.0
            axes.barh(y - 0.4 + (0.8 - height) / 2, width, height=height, left=left, align="edge",
                      color=colour(e, key[1]), edgecolor="#333333", linewidth=0.3)
            # Names where they fit: the innermost spans (layer groups), and outer ones that have no children.
            text = e["name"].replace("forward ", "").replace("backward ", "").replace("allreduce ", "")
            if e["cat"] != "step" and width * 1000.0 / (end - start) > 0.0065 * max(4, len(text)):
                axes.text(left + width / 2, y - (0.22 if d == 0 and e["cat"] == "compute" else 0), text,
                          ha="center", va="center", fontsize=5.5, clip_on=True)
        labels.append(f"rank {key[0]}: {names.get(key, key[1])}")
    axes.set_yticks(range(len(rows)))
    axes.set_yticklabels(list(reversed(labels)), fontsize=7)
    axes.set_xlim(0, (end - start) / 1000.0)
    axes.set_xlabel("milliseconds" + (f" (steps {args.steps})" if args.steps else ""))
    legend = [Patch(color=COLOURS["data_wait"], label="waiting for data"),
              Patch(color=COLOURS["compute"], label="compute (forward, loss, backward, optimizer)"),
              Patch(color=COLOURS["detail"], label="layer groups, copies"),
              Patch(color=COLOURS["exposed_communication"], label="exposed communication"),
              Patch(color=BUCKET_COLOUR, label="gradient bucket allreduce"),
              Patch(color=LOADER_COLOUR, label="loader thread (read, decode, augment)"),
              Patch(color=COLOURS["pause"], label="validation, checkpoint"),
              Patch(color=COLOURS["step"], label="step")]
    axes.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / max(1, len(rows))),
                ncol=4, fontsize=7, frameon=False)
    axes.set_title(f"train timeline: {os.path.basename(args.trace)}, {len(processes)} ranks", fontsize=9)
    figure.tight_layout()
    # Written to a temporary name in the same folder, then renamed: a reader never sees half a PNG.
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(args.out)), suffix=".png")
    os.close(handle)
    figure.savefig(temporary, dpi=130)
    os.replace(temporary, args.out)
    print(f"{args.out}: {len(rows)} tracks, {(end - start) / 1000.0:.1f} ms")


if __name__ == "__main__":
    main()
