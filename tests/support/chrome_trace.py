"""A strict reader of Chrome trace-event JSON, the format of train's timeline (output/data/timeline/*.json).

Perfetto's trace_processor (PyPI's `perfetto`) would be the real parser, but it downloads its
trace_processor_shell binary at first use, and this machine reaches no network but the package registries;
so this checks the file against the Trace Event Format's JSON Object Format as Perfetto's JSON importer
reads it, and refuses anything it would not take as we mean it:
- the document is an object with a `traceEvents` array; `displayTimeUnit` is "ms" or "ns"; nothing else but
  the format's own keys;
- every event is an object with a known phase and exactly the fields that phase has: complete events ("X")
  name, cat, pid, tid, ts, dur >= 0, args (an object); counters ("C") numeric args; metadata ("M")
  process_name / thread_name (a string name) and process_sort_index / thread_sort_index (an integer);
- pid and tid are integers, ts and dur finite numbers (read as exact decimals);
- on every track (pid, tid) the complete events nest: each lies within the one around it or after it, as
  Perfetto's slice tracks need (overlapping slices are dropped with an import error);
- every track with events has a thread_name, every process a process_name.
Returns the events as plain dicts, ts and dur as Decimal microseconds.

    /usr/bin/python3 tests/support/chrome_trace.py FILE.json    (prints a summary or the problems; exit 1 on any)
"""
import decimal
import json
import math
import sys

TOP_LEVEL = {"traceEvents", "displayTimeUnit", "otherData", "systemTraceEvents", "stackFrames", "samples",
             "metadata", "controllerTraceDataKey"}
FIELDS = {
    "X": ({"name", "cat", "ph", "pid", "tid", "ts", "dur"}, {"args"}),
    "C": ({"name", "ph", "pid", "ts", "args"}, {"cat", "tid", "id"}),
    "M": ({"name", "ph", "pid", "args"}, {"tid", "cat"}),
}
METADATA = {"process_name": str, "thread_name": str, "process_sort_index": int, "thread_sort_index": int}


class TraceError(ValueError):
    pass


def _number(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
        raise TraceError(f"{what}: expected a number, got {value!r}")
    if isinstance(value, decimal.Decimal) and not value.is_finite():
        raise TraceError(f"{what}: not finite")
    return decimal.Decimal(value)


def _integer(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(f"{what}: expected an integer, got {value!r}")
    return value


def read_trace(path):
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle, parse_float=decimal.Decimal,
                             parse_constant=lambda c: (_ for _ in ()).throw(TraceError(f"{c} is not JSON")))
    return check_document(document)


def check_document(document):
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise TraceError("expected an object with a traceEvents array (the JSON Object Format)")
    unknown = set(document) - TOP_LEVEL
    if unknown:
        raise TraceError(f"unknown top-level keys {sorted(unknown)}")
    if document.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        raise TraceError(f"displayTimeUnit {document['displayTimeUnit']!r}: expected ms or ns")
    events, process_names, thread_names = [], set(), set()
    for number, event in enumerate(document["traceEvents"]):
        where = f"traceEvents[{number}]"
        if not isinstance(event, dict) or event.get("ph") not in FIELDS:
            raise TraceError(f"{where}: expected an event object with ph X, C or M, got {event!r:.200}")
        required, optional = FIELDS[event["ph"]]
        if required - set(event) or set(event) - required - optional:
            raise TraceError(f"{where} ({event['ph']}): missing {sorted(required - set(event))}, unknown "
                             f"{sorted(set(event) - required - optional)}")
        if not isinstance(event["name"], str) or not event["name"]:
            raise TraceError(f"{where}: name must be a non-empty string")
        if "cat" in event and not isinstance(event["cat"], str):
            raise TraceError(f"{where}: cat must be a string")
        _integer(event["pid"], f"{where}.pid")
        if "tid" in event:
            _integer(event["tid"], f"{where}.tid")
        if "args" in event and not isinstance(event["args"], dict):
            raise TraceError(f"{where}: args must be an object")
        if event["ph"] == "M":
            kind = METADATA.get(event["name"])
            key = "name" if kind is str else "sort_index"
            if kind is None or set(event["args"]) != {key} or not isinstance(event["args"][key], kind):
                raise TraceError(f"{where}: metadata {event['name']!r} with args {event['args']!r}")
            if event["name"] == "process_name":
                process_names.add(event["pid"])
            if event["name"] == "thread_name":
                thread_names.add((event["pid"], event.get("tid")))
            continue
        event = dict(event, ts=_number(event["ts"], f"{where}.ts"))
        if event["ph"] == "X":
            event["dur"] = _number(event["dur"], f"{where}.dur")
            if event["dur"] < 0:
                raise TraceError(f"{where}: negative dur")
        else:
            for key, value in event["args"].items():
                if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)) or \
                        (isinstance(value, decimal.Decimal) and not math.isfinite(value)):
                    raise TraceError(f"{where}: counter value {key}={value!r} is not a number")
        events.append(event)
    tracks = {}
    for event in events:
        if event["ph"] == "X":
            tracks.setdefault((event["pid"], event["tid"]), []).append(event)
    for key, spans in tracks.items():
        if key[0] not in process_names:
            raise TraceError(f"process {key[0]} has events but no process_name")
        if key not in thread_names:
            raise TraceError(f"track {key} has events but no thread_name")
        stack = []
        for span in sorted(spans, key=lambda e: (e["ts"], -e["dur"])):
            while stack and span["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            if stack and span["ts"] + span["dur"] > stack[-1]["ts"] + stack[-1]["dur"]:
                raise TraceError(f"track {key}: {span['name']!r} at {span['ts']} overlaps {stack[-1]['name']!r} "
                                 f"at {stack[-1]['ts']} without nesting in it")
            stack.append(span)
    return document, events


def step_shares(rank_spans):
    """A rank's recorded time as its summary line adds it up: the steps' ("step" spans) and, within them, that
    of its "data_wait", "compute" and "exposed_communication" spans, pauses ("pause" spans, the checkpoint's
    write, say) left out. `rank_spans`: the rank's complete ("X") events."""
    pauses = [(e["ts"], e["ts"] + e["dur"]) for e in rank_spans if e["cat"] == "pause"]

    def unpaused(a, b):
        return max(0, b - a) - sum(max(0, min(b, pe) - max(a, ps)) for ps, pe in pauses)

    totals = {"step": 0, "data_wait": 0, "compute": 0, "exposed_communication": 0}
    for step in (e for e in rank_spans if e["cat"] == "step"):
        step_end = step["ts"] + step["dur"]
        totals["step"] += unpaused(step["ts"], step_end)
        for e in rank_spans:
            if e["cat"] in ("data_wait", "compute", "exposed_communication"):
                totals[e["cat"]] += unpaused(max(e["ts"], step["ts"]), min(e["ts"] + e["dur"], step_end))
    return totals


def main():
    try:
        document, events = read_trace(sys.argv[1])
    except (TraceError, ValueError, OSError) as error:
        print(f"{sys.argv[1]}: not a valid trace: {error}")
        return 1
    processes = sorted({e["pid"] for e in events})
    print(f"{sys.argv[1]}: valid Chrome trace-event JSON: {len(events)} events, processes {processes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
