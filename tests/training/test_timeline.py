"""The timeline of a 2-rank CPU job (timeline_steps), with the real `train` on this host:

- every file (rank-0.json, rank-1.json, the merged timeline.json) is valid Chrome trace-event JSON, checked by
  tests/support/chrome_trace.py (a strict reader of the format as Perfetto imports it: Perfetto's own
  trace_processor downloads a binary at first use, which this machine cannot);
- every expected track and span is there on each rank: the training thread's steps, data waits, stop votes,
  a validation and a checkpoint (the recorded range holds an epoch's end); the compute track's forward,
  loss, backward by layer group, wait for the reductions and optimizer; a track per gradient bucket with its
  bytes; the loader's threads with read/decode/augment times, and the loader counter;
- the first bucket's allreduce starts before backward ends, in every recorded step of every rank;
- the summary printed for each rank adds up: recomputed here from the trace's events, waiting for data +
  compute + exposed communication is the step time within 5%, and equals the printed shares;
- the ranks' clocks are one (one host: offset 0); TRAIN_TIMELINE gives the same, and disagreeing with the
  hyperparameter is a clear error; a range past the job's end records nothing, with a warning;
- scripts/timeline_png.py draws the merged file.

Run: /usr/bin/python3 test_timeline.py --train PATH
"""
import decimal
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from chrome_trace import TraceError, check_document, read_trace, step_shares  # noqa: E402
from command_line import paths_and_unittest_argv  # noqa: E402

TRAIN = None
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB_LIMIT = 600
FIRST, LAST = 6, 12  # 8 steps per epoch: the range holds the end of epoch 0 (validation, checkpoint)
GROUPS = ["stem", "layer1", "layer2", "layer3", "layer4", "head"]
SUMMARY = re.compile(r"timeline rank=(\d+) host=(\S+) steps=(\d+)-(\d+) step_ms=([\d.]+) data_wait=([\d.]+)% "
                     r"compute=([\d.]+)% exposed_communication=([\d.]+)% other=(-?[\d.]+)%")


def write_job(base, data, hyperparameters):
    config = os.path.join(base, "input", "config")
    os.makedirs(config, exist_ok=True)
    os.makedirs(os.path.join(base, "input", "data"), exist_ok=True)
    for channel in ("train", "validation"):
        link = os.path.join(base, "input", "data", channel)
        if not os.path.lexists(link):
            os.symlink(os.path.join(data, channel), link)
    with open(os.path.join(config, "hyperparameters.json"), "w") as f:
        json.dump(hyperparameters, f)
    with open(os.path.join(config, "inputdataconfig.json"), "w") as f:
        json.dump({"train": {"TrainingInputMode": "File"}, "validation": {"TrainingInputMode": "File"}}, f)


def run_train(base, env=None):
    full_env = {name: value for name, value in os.environ.items()
                if not name.startswith(("OMPI_", "PMIX_", "SM_", "TRAIN_TIMELINE"))}
    full_env.update(SAGEMAKER_BASE_DIR=base, **(env or {}))
    result = subprocess.run([TRAIN], env=full_env, capture_output=True, text=True, timeout=JOB_LIMIT)
    return result.returncode, result.stdout, result.stderr


def hyperparameters(**extra):
    values = {"num_layers": "18", "image_shape": "3,32,32", "mini_batch_size": "32", "processes_per_host": "2",
              "epochs": "2", "learning_rate": "0.1", "augmentation_type": "crop", "checkpoint_frequency": "1"}
    values.update(extra)
    return values


def spans(events, pid, tid=None):
    return [e for e in events if e["ph"] == "X" and e["pid"] == pid and (tid is None or e["tid"] == tid)]


def end(event):
    return event["ts"] + event["dur"]


def fashion_folder(prefix, images):
    """A temporary folder holding `images` Fashion-MNIST images as an image folder: (TemporaryDirectory, data)."""
    work = tempfile.TemporaryDirectory(prefix=prefix)
    data = os.path.join(work.name, "fashion")
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "make_fashion_mnist_folder.py"), "--limit",
                    str(images), data], check=True, capture_output=True)
    return work, data


class TimelineOfATwoRankJob(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work, cls.data = fashion_folder("train-timeline-", 256)
        cls.base = os.path.join(cls.work.name, "job")
        write_job(cls.base, cls.data, hyperparameters(timeline_steps=f"{FIRST}-{LAST}"))
        cls.code, cls.stdout, cls.stderr = run_train(cls.base)
        cls.folder = os.path.join(cls.base, "output", "data", "timeline")

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def setUp(self):
        self.assertEqual(self.code, 0, self.stderr[-3000:])

    def test_files_are_valid_traces_of_bounded_size(self):
        for name in ("rank-0.json", "rank-1.json", "timeline.json"):
            path = os.path.join(self.folder, name)
            document, events = read_trace(path)
            pids = {e["pid"] for e in events}
            self.assertEqual(pids, {0, 1} if name == "timeline.json" else {int(name[5])}, name)
            size = os.path.getsize(path)
            print(f"{name}: {size} bytes, {len(events)} events for {LAST - FIRST + 1} steps", file=sys.stderr)
            self.assertLess(size, 1_000_000, name)
        self.assertFalse([n for n in os.listdir(self.folder) if ".tmp" in n], "temporary files left behind")

    def test_the_reader_refuses_what_perfetto_would_not_take(self):
        """The checker can fail: overlapping spans on one track, a span without a name, a string timestamp."""
        base = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "p"}},
                {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "t"}}]
        span = {"ph": "X", "name": "a", "cat": "c", "pid": 0, "tid": 1, "ts": 0, "dur": 10}
        check_document({"traceEvents": base + [span]})
        for bad in ([span, dict(span, name="b", ts=5)], [dict(span, name="")], [dict(span, ts="0")],
                    [dict(span, tid=2)], [dict(span, ph="B")]):
            with self.assertRaises(TraceError, msg=bad):
                check_document({"traceEvents": base + bad})

    def test_every_track_and_span_is_there(self):
        document, events = read_trace(os.path.join(self.folder, "timeline.json"))
        steps = [f"step {s}" for s in range(FIRST, LAST + 1)]
        for rank in (0, 1):
            trainer = [e["name"] for e in spans(events, rank, 1)]
            compute = [e["name"] for e in spans(events, rank, 3)]
            self.assertEqual(sorted(n for n in trainer if n.startswith("step ")), sorted(steps))
            for name in ("waiting for data", "train_step", "stop vote", "validation", "checkpoint"):
                self.assertIn(name, trainer, f"rank {rank}")
            for name in ("forward", "loss", "backward", "waiting for reductions", "optimizer"):
                self.assertEqual(compute.count(name), len(steps), f"rank {rank}: {name}")
            for group in GROUPS:
                self.assertEqual(compute.count(f"forward {group}"), len(steps), f"rank {rank}: forward {group}")
                self.assertEqual(compute.count(f"backward {group}"), len(steps), f"rank {rank}: backward {group}")
            buckets = [e for e in spans(events, rank) if 100 <= e["tid"] < 10000]
            self.assertGreaterEqual(len({e["tid"] for e in buckets}), 2, f"rank {rank}: bucket tracks")
            self.assertTrue(all(e["args"]["bytes"] > 0 for e in buckets))
            self.assertEqual(len(buckets), len(steps) * len({e["tid"] for e in buckets}))
            loader = [e for e in spans(events, rank) if e["tid"] >= 10000]
            self.assertTrue(loader, f"rank {rank}: loader spans")
            for piece in loader:
                self.assertEqual(piece["name"], "load batch")
                self.assertGreater(piece["args"]["samples"], 0)
                self.assertGreater(piece["args"]["read_ms"] + piece["args"]["decode_ms"], 0)
                self.assertGreater(piece["args"]["augment_ms"], 0)
            counters = [e for e in events if e["ph"] == "C" and e["pid"] == rank]
            self.assertTrue(counters and all(set(c["args"]) == {"read", "decode", "augment"} for c in counters))
        names = {(e["pid"], e["tid"]): e["args"]["name"] for e in document["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "thread_name"}
        self.assertIn("compute (training thread)", names.values())
        self.assertIn("loader thread 0", names.values())

    def test_buckets_start_before_backward_ends(self):
        _, events = read_trace(os.path.join(self.folder, "timeline.json"))
        for rank in (0, 1):
            backward = [e for e in spans(events, rank, 3) if e["name"] == "backward"]
            first_bucket = [e for e in spans(events, rank, 100)]
            self.assertEqual(len(backward), len(first_bucket))
            for step, (b, bucket) in enumerate(zip(sorted(backward, key=lambda e: e["ts"]),
                                                   sorted(first_bucket, key=lambda e: e["ts"]))):
                self.assertEqual(bucket["args"]["step"], FIRST + step)
                self.assertGreater(bucket["ts"], b["ts"], f"rank {rank} step {FIRST + step}")
                self.assertLess(bucket["ts"], end(b), f"rank {rank} step {FIRST + step}: bucket 0 starts after backward")

    def test_summary_adds_up_to_the_step_time(self):
        _, events = read_trace(os.path.join(self.folder, "timeline.json"))
        printed = {int(m.group(1)): m for m in SUMMARY.finditer(self.stdout)}
        self.assertEqual(sorted(printed), [0, 1], self.stdout[-2000:])
        for rank, line in printed.items():
            self.assertEqual((int(line.group(3)), int(line.group(4))), (FIRST, LAST))
            steps = [e for e in spans(events, rank) if e["cat"] == "step"]
            self.assertEqual(len(steps), LAST - FIRST + 1)
            totals = step_shares(spans(events, rank))
            counted = totals["data_wait"] + totals["compute"] + totals["exposed_communication"]
            print(f"rank {rank}: steps {float(totals['step']) / 1e3:.1f} ms, counted {float(counted) / 1e3:.1f} ms "
                  f"({float(counted / totals['step']) * 100:.2f}%): {line.group(0)}", file=sys.stderr)
            self.assertLess(abs(totals["step"] - counted), decimal.Decimal("0.05") * totals["step"])
            for group, key in ((6, "data_wait"), (7, "compute"), (8, "exposed_communication")):
                self.assertAlmostEqual(float(line.group(group)), float(totals[key] / totals["step"]) * 100, delta=0.11)
            self.assertAlmostEqual(float(line.group(5)), float(totals["step"]) / 1e3 / len(steps), delta=0.02)

    def test_one_clock_on_one_host(self):
        with open(os.path.join(self.folder, "timeline.json")) as f:
            ranks = json.load(f)["otherData"]["timeline"]["ranks"]
        self.assertEqual([r["clock"]["offset_to_rank_0_ns"] for r in ranks], [0, 0])
        self.assertEqual([r["clock"]["measured_by_rank"] for r in ranks], [0, 0])

    def test_png_is_drawn(self):
        out = os.path.join(self.work.name, "timeline.png")
        subprocess.run(["/usr/bin/python3", os.path.join(REPO, "scripts", "timeline_png.py"),
                        os.path.join(self.folder, "timeline.json"), out, "--steps", f"{FIRST}-{FIRST + 1}"],
                       check=True, capture_output=True)
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


class TimelineSettings(unittest.TestCase):
    """TRAIN_TIMELINE; disagreeing settings; a range past the job's end. Short jobs (max_steps)."""

    @classmethod
    def setUpClass(cls):
        cls.work, cls.data = fashion_folder("train-timeline-settings-", 128)

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def job(self, name, **extra):
        base = os.path.join(self.work.name, name)
        write_job(base, self.data, hyperparameters(max_steps="3", epochs="1", **extra))
        return base

    def test_environment_variable_records_the_same(self):
        base = self.job("variable")
        code, stdout, stderr = run_train(base, {"TRAIN_TIMELINE": "2-3"})
        self.assertEqual(code, 0, stderr[-2000:])
        self.assertEqual(sorted(int(m.group(1)) for m in SUMMARY.finditer(stdout)), [0, 1])
        _, events = read_trace(os.path.join(base, "output", "data", "timeline", "timeline.json"))
        self.assertEqual(sorted(e["name"] for e in spans(events, 1, 1) if e["cat"] == "step"), ["step 2", "step 3"])

    def test_disagreeing_settings_are_an_error(self):
        base = self.job("disagree", timeline_steps="1-2")
        code, stdout, stderr = run_train(base, {"TRAIN_TIMELINE": "2-3"})
        self.assertEqual(code, 65, stderr[-2000:])
        with open(os.path.join(base, "output", "failure")) as f:
            failure = f.read()
        self.assertIn("hyperparameter `timeline_steps` (1-2) and environment variable TRAIN_TIMELINE", failure)

    def test_a_malformed_range_is_refused_before_training(self):
        base = self.job("malformed", timeline_steps="20-10")
        code, stdout, stderr = run_train(base)
        self.assertEqual(code, 65, stderr[-2000:])
        with open(os.path.join(base, "output", "failure")) as f:
            self.assertIn("hyperparameter `timeline_steps`: expected a range of steps", f.read())

    def test_a_range_past_the_end_records_nothing(self):
        base = self.job("past", timeline_steps="50-60")
        code, stdout, stderr = run_train(base)
        self.assertEqual(code, 0, stderr[-2000:])
        self.assertIn("warning: timeline: steps 50-60 are not among the steps this job runs (1 to 3)", stderr)
        self.assertFalse(os.path.exists(os.path.join(base, "output", "data", "timeline")))


if __name__ == "__main__":
    (TRAIN,), argv = paths_and_unittest_argv("--train")
    unittest.main(argv=argv, verbosity=2)
