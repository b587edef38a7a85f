#!/usr/bin/env python3
"""scripts/bench/gpu_step_bench.py without a GPU: a stand-in for gpu_step_bench (a script printing its JSON lines)
and for PyTorch's step (prepare_peer replaced), so that a GPU loan is not spent on the script's own mistakes.
Its table, ratios and CHECK lines; ours' figures read back from an earlier --json (--against); --ready/--go:
the peer is prepared, the ready file written, and nothing is timed until the go file appears (exit 3 when it
never does); a failed preparation writes no ready file and exits 1.

    test_gpu_step_bench.py REPO
"""
import contextlib
import io
import json
import os
import sys
import tempfile
import threading
import time
import unittest

REPO = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts", "bench"))
import gpu_step_bench  # noqa: E402

OURS = """#!/bin/bash
batches=$(echo "$@" | sed 's/.*--batches \\([0-9,]*\\).*/\\1/')
for b in ${batches//,/ }; do
  echo "{\\"batch\\": $b, \\"images_per_sec\\": $((b * 10 + ${TRAIN_SHARED_GRADIENT_BUFFERS:-0} * 100)).0, \\"rounds\\": [1.0], \\"device_bytes\\": 2147483648, \\"gpu\\": \\"Stand-in GPU\\"}"
done
"""


class Bench(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.mkdtemp(prefix="gpu-step-bench-test-")
        self.ours = os.path.join(self.scratch, "ours.sh")
        with open(self.ours, "w") as f:
            f.write(OURS)
        os.chmod(self.ours, 0o755)
        self.timed_at = []
        self.original = gpu_step_bench.prepare_peer

        def prepare(mode, depth, size, batch, precision):
            if batch == 999:
                raise RuntimeError("CUDA out of memory")

            def measure(steps, rounds):
                self.timed_at.append(time.monotonic())
                return {"images_per_sec": {"eager": 500.0, "compile": 1000.0}[mode] * batch / 64,
                        "rounds": [1.0], "prepare_seconds": 7.0, "device_bytes": 1073741824, "reserved_bytes": 0}
            return measure

        gpu_step_bench.prepare_peer = prepare

    def tearDown(self):
        gpu_step_bench.prepare_peer = self.original

    def main(self, *arguments):
        sys.argv = ["gpu_step_bench.py", "--ours", self.ours] + list(arguments)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = gpu_step_bench.main()
        return code, out.getvalue()

    def test_ours_beside_eager_table_ratios_and_rows(self):
        json_path = os.path.join(self.scratch, "ours.json")
        code, out = self.main("--batches", "64,256", "--peers", "eager", "--json", json_path)
        self.assertEqual(code, 0, out)
        self.assertIn("| 256 | ours, fast | 2,660 | 2.0 | 1.33 | - |", out)  # 2660 / (500 * 4)
        self.assertIn("CHECK|ResNet-50 bfloat16 img/s at batch 64, the CUDA engine beside PyTorch eager|INFO|"
                      "ours (reference) 640 img/s, 2.0 GiB; ours (fast) 740 img/s, 2.0 GiB; PyTorch eager 500 img/s, "
                      "1.0 GiB; reference/eager 1.28x; fast/eager 1.48x", out)
        with open(json_path) as f:
            self.assertEqual(json.load(f)["ours"]["fast"]["256"]["images_per_sec"], 2660.0)

    def test_a_prepared_peer_waits_for_go_then_compares_with_ours_of_before(self):
        against = os.path.join(self.scratch, "ours.json")
        self.main("--batches", "128", "--peers", "none", "--json", against)
        ready, go = os.path.join(self.scratch, "ready"), os.path.join(self.scratch, "go")
        result = {}
        thread = threading.Thread(target=lambda: result.update(zip(("code", "out"), self.main(
            "--batches", "128", "--variants", "none", "--peers", "compile", "--ready", ready, "--go", go,
            "--go-timeout", "30", "--against", against))))
        thread.start()
        deadline = time.monotonic() + 30
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(ready), "no ready file")
        time.sleep(0.5)
        self.assertEqual(self.timed_at, [], "timed before go")
        released = time.monotonic()
        open(go, "w").close()
        thread.join(timeout=30)
        self.assertEqual(result.get("code"), 0, result.get("out"))
        self.assertGreaterEqual(self.timed_at[0], released)
        self.assertIn("PyTorch compile 2,000 img/s, 1.0 GiB (compiled in 7 s); reference/compile 0.64x; "
                      "fast/compile 0.69x", result["out"])

    def test_no_go_is_exit_3_and_a_failed_preparation_writes_no_ready_file(self):
        ready, go = os.path.join(self.scratch, "ready"), os.path.join(self.scratch, "go")
        code, _ = self.main("--batches", "64", "--variants", "none", "--peers", "compile", "--ready", ready,
                            "--go", go, "--go-timeout", "0.5")
        self.assertEqual(code, 3)
        self.assertEqual(self.timed_at, [])
        os.remove(ready)
        code, out = self.main("--batches", "999", "--variants", "none", "--peers", "compile", "--ready", ready,
                              "--go", go, "--go-timeout", "30")
        self.assertEqual(code, 1)
        self.assertFalse(os.path.exists(ready))
        self.assertIn("PyTorch compile RuntimeError: CUDA out of memory", out)

    def test_usage(self):
        for arguments in (["--ready", "r"], ["--ready", "r", "--go", "g", "--batches", "64,128", "--variants", "none"],
                          ["--variants", "slow"]):
            with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
                self.main(*arguments)


if __name__ == "__main__":
    unittest.main()
