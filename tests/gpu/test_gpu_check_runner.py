#!/usr/bin/env python3
"""scripts/gpu/gpu_check.py's runner without a GPU: plans of stand-in commands (shell one-liners) instead of the GPU
checks, so that a GPU loan is not spent on the runner's own mistakes. Checks side by side and in order (what
they wait for, the timed ones alone), a check stopped at its budget with everything it started, table.md
rewritten while checks run (and left with every finished row when the runner is stopped), CHECK lines as rows,
the sanitizer's refusal as INFO, a check that gets ready and is timed later.

    test_gpu_check_runner.py REPO
"""
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

REPO = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts", "gpu"))
import gpu_check  # noqa: E402


def shell(script):
    return ["bash", "-c", script]


def context(scratch):
    c = gpu_check.Context()
    c.logdir, c.work = os.path.join(scratch, "log"), os.path.join(scratch, "work")
    os.makedirs(c.logdir)
    os.makedirs(c.work)
    c.command, c.began, c.gpu, c.bundle_made = "test", "now", "a stand-in GPU", "none"
    return c


def stamps(work, key):
    """A command that writes its start and end times (and runs `body` between; fails when it does)."""
    return lambda body: shell(f"date +%s.%N > {work}/{key}.start; {{ {body}; }} || exit 1; "
                              f"date +%s.%N > {work}/{key}.end; echo 'stand-in: all cases passed'")


def times(work, key):
    with open(f"{work}/{key}.start") as f, open(f"{work}/{key}.end") as g:
        return float(f.read()), float(g.read())


def alive(pid):
    """Whether the `sleep` with this pid still runs (not gone, not a zombie)."""
    status = gpu_check.read(f"/proc/{pid}/status")
    return "Name:\tsleep" in status and "zombie" not in status


class Runner(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.mkdtemp(prefix="gpu-check-runner-")
        self.context = context(self.scratch)
        self.work = self.context.work

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.scratch])

    def run_group(self, plan):
        rows = gpu_check.Group("test", plan, self.context).run()
        with open(os.path.join(self.context.logdir, "table.md")) as f:
            return rows, f.read()

    def test_side_by_side_in_order_and_alone(self):
        w = self.work
        # a and b each wait for the other's file: they pass only when they run at the same time.
        meet = "touch {w}/{me}.here; for i in $(seq 600); do [ -e {w}/{other}.here ] && break; sleep 0.05; done; " \
               "[ -e {w}/{other}.here ]"
        plan = [
            gpu_check.Check("a", "check a", 60, "-", stamps(w, "a")(meet.format(w=w, me="a", other="b"))),
            gpu_check.Check("b", "check b", 60, "-", stamps(w, "b")(meet.format(w=w, me="b", other="a"))),
            gpu_check.Check("c", "check c", 20, "-", stamps(w, "c")("sleep 0.5"), after=("a",)),
            gpu_check.Check("d", "check d", 20, "-", stamps(w, "d")("sleep 0.5"), alone=True),
            gpu_check.Check("e", "check e", 20, "-", stamps(w, "e")("sleep 0.2"), alone=True),
        ]
        rows, table = self.run_group(plan)
        self.assertEqual([verdict for _, verdict, _ in rows], ["PASS"] * 5, table)
        a, b, c, d, e = (times(w, key) for key in "abcde")
        self.assertGreaterEqual(c[0], a[1], "c started before a, which it waits for, ended")
        self.assertGreaterEqual(d[0], max(a[1], b[1], c[1]), "the alone check d started while others ran")
        self.assertGreaterEqual(e[0], d[1], "two alone checks overlapped")
        self.assertIn("| 3 | check c | PASS | stand-in: all cases passed;", table)

    def test_a_check_past_its_budget_is_stopped_with_what_it_started(self):
        pid_file = os.path.join(self.work, "grandchild.pid")
        plan = [gpu_check.Check("slow", "a check that hangs", 2, "-",
                                shell(f"setsid sleep 300 & echo $! > {pid_file}; wait")),
                gpu_check.Check("after", "a check after it", 20, "-", shell("echo passed"), after=("slow",))]
        rows, table = self.run_group(plan)
        self.assertEqual(rows[0][1], "FAIL")
        self.assertIn("its budget (2 s) ran out", rows[0][2])
        self.assertEqual(rows[1][1], "PASS", "a check after a stopped one still runs")
        with open(pid_file) as f:
            grandchild = int(f.read())
        deadline = time.monotonic() + 10  # a killed process leaves /proc (or turns zombie) as soon as it is scheduled
        while time.monotonic() < deadline and alive(grandchild):
            time.sleep(0.05)
        self.assertFalse(alive(grandchild), "the check's own child survived it")

    def test_the_table_is_rewritten_while_checks_run(self):
        table = os.path.join(self.context.logdir, "table.md")
        plan = [gpu_check.Check("quick", "a quick check", 20, "-", shell("echo 'quick: passed'")),
                gpu_check.Check("long", "a longer check", 60, "-", shell(
                    f"for i in $(seq 600); do grep -q 'quick check . PASS' {table} && break; sleep 0.05; done; "
                    f"cp {table} {self.work}/seen.md; echo 'long: passed'"))]
        self.run_group(plan)
        with open(os.path.join(self.work, "seen.md")) as f:
            seen = f.read()
        self.assertIn("| 1 | a quick check | PASS |", seen)
        self.assertIn("| 2 | a longer check | running |", seen)
        self.assertIn("- GPU: a stand-in GPU", seen)

    def test_rows_from_check_lines_sanitizer_refusals_and_exit_codes(self):
        refusal = "========= Error: Device not supported\n========= ERROR SUMMARY: 0 errors"
        plan = [
            gpu_check.Check("lines", "training", 20, "-", shell(
                "echo 'CHECK|one|PASS|fine'; echo 'CHECK|two|FAIL|bytes DIFFERENT'; exit 1"), rows="lines"),
            gpu_check.Check("silent", "no lines", 20, "-", shell("echo crashed; exit 1"), rows="lines"),
            gpu_check.Check("info", "benchmark", 20, "-", shell("echo 'CHECK|speed|INFO|1 img/s'; exit 1"),
                            rows="lines"),
            gpu_check.Check("refused", "sanitizer refused", 20, "-", shell(f"echo '{refusal}'; exit 1"),
                            rows="sanitizer"),
            gpu_check.Check("errors", "sanitizer errors", 20, "-", shell(
                "echo '========= Invalid __global__ read'; echo '========= ERROR SUMMARY: 2 errors'; exit 99"),
                rows="sanitizer"),
            gpu_check.Check("clean", "sanitizer clean", 20, "-", shell("echo '========= ERROR SUMMARY: 0 errors'"),
                            rows="sanitizer"),
            gpu_check.Check("broken", "a program that fails", 20, "-", shell(
                "echo 'op 1 FAIL'; echo 'op 2 FAIL'; echo 'x: 2 of 4 checks passed -- FAILURES above'; exit 1")),
        ]
        rows, table = self.run_group(plan)
        self.assertEqual([(name, verdict) for name, verdict, _ in rows], [
            ("one", "PASS"), ("two", "FAIL"), ("no lines", "FAIL"), ("speed", "INFO"), ("benchmark", "FAIL"),
            ("sanitizer refused", "INFO"), ("sanitizer errors", "FAIL"), ("sanitizer clean", "PASS"),
            ("a program that fails", "FAIL")], table)
        details = {name: detail for name, _, detail in rows}
        self.assertIn("Device not supported", details["sanitizer refused"])
        self.assertIn("ERROR SUMMARY: 2 errors", details["sanitizer errors"])
        self.assertIn("2 FAIL lines", details["a program that fails"])
        self.assertIn("no result; exit 1", details["no lines"])

    def test_sanitizer_reports_inside_nvidias_libraries_are_named_not_held_against_us(self):
        # As compute-sanitizer 2025.3 wrote them on an H200 (2026-11-27), shortened.
        race_in = lambda kernel: (  # noqa: E731
            f"========= Error: Race reported between Write access at {kernel}+0x8d30\n"
            f"=========     and Read access at {kernel}+0xae30 [64 hazards]\n=========\n")
        cudnn = "sm90_xmma_dgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize256x64x32_cudnn"
        nccl_probe = ("========= Program hit cudaErrorNoKernelImageForDevice (error 209) due to \"no kernel image is "
                      "available\" on CUDA API call to cudaFuncGetAttributes.\n=========     Saved host backtrace up "
                      "to driver entry point at error\n=========         Host Frame: ncclInitKernelsForDevice(int, int, "
                      "unsigned long*) in enqueue.cc:52 [0x6d9d3] in libnccl.so.2\n=========\n")
        ours_api = nccl_probe.replace("ncclInitKernelsForDevice(int, int, unsigned long*) in enqueue.cc:52 [0x6d9d3] "
                                      "in libnccl.so.2", "train::kernels::cuda::conv2d() [0x1234] in train")
        passed = "gpu_step_check: 226 of 226 checks passed\n"
        cases = {
            "library race": race_in(cudnn) + passed + "========= RACECHECK SUMMARY: 1 hazard displayed (1 error)",
            "library API errors": nccl_probe * 2 + "all 1 ranks finished successfully\n========= ERROR SUMMARY: 2 errors",
            "our race": race_in(cudnn) + race_in("void train::sgd_update<float>(...)") + passed +
                        "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors)",
            "our API error": nccl_probe + ours_api + "all 1 ranks finished successfully\n========= ERROR SUMMARY: 2 errors",
            "library race, program failed": race_in(cudnn) + "gpu_step_check: 225 of 226 checks passed\n"
                                            "========= RACECHECK SUMMARY: 1 hazard displayed (1 error)",
        }
        plan = []
        for index, (name, log) in enumerate(cases.items()):
            path = os.path.join(self.work, f"case-{index}.txt")
            with open(path, "w") as f:
                f.write(log + "\n")
            check = gpu_check.Check(f"case-{index}", name, 20, "-", shell(f"cat {path}; exit 99"), rows="sanitizer")
            check.succeeded = gpu_check.SANITIZED_PROGRAM_SUCCEEDED["train" if "API" in name else "step"]
            plan.append(check)
        rows, table = self.run_group(plan)
        verdicts = {name: (verdict, detail) for name, verdict, detail in rows}
        self.assertEqual({name: verdict for name, (verdict, _) in verdicts.items()}, {
            "library race": "PASS", "library API errors": "PASS", "our race": "FAIL", "our API error": "FAIL",
            "library race, program failed": "FAIL"}, table)
        self.assertIn("nothing in our code; 1 report(s) inside NVIDIA's libraries", verdicts["library race"][1])
        self.assertIn(cudnn, verdicts["library race"][1])
        self.assertIn("in libnccl.so.2", verdicts["library API errors"][1])
        self.assertIn("in our code: Error: Race reported between Write access at void train::sgd_update",
                      verdicts["our race"][1])
        self.assertIn("inside NVIDIA's libraries: 1", verdicts["our race"][1])
        self.assertIn("in our code: Program hit cudaErrorNoKernelImageForDevice", verdicts["our API error"][1])
        self.assertIn("the program did not succeed", verdicts["library race, program failed"][1])

    def test_nothing_waiting_for_a_failed_gate_runs(self):
        marker = os.path.join(self.work, "ran")
        plan = [gpu_check.Check("machine", "libraries", 20, "-", shell("echo 'libcudnn.so.9: not found'; exit 127"),
                                gate=True),
                gpu_check.Check("step", "step", 20, "-", shell(f"touch {marker}"), after=("machine",)),
                gpu_check.Check("bench", "bench", 20, "-", shell(f"touch {marker}"), after=("machine",), alone=True)]
        rows, table = self.run_group(plan)
        self.assertEqual([verdict for _, verdict, _ in rows], ["FAIL", "FAIL", "FAIL"], table)
        self.assertFalse(os.path.exists(marker))
        self.assertEqual(rows[1][2], "not run: machine failed (its row)")
        self.assertIn("| 2 | step | FAIL | not run: machine failed (its row) |  | 20 |", table)

    def test_a_check_ready_early_is_timed_alone_later(self):
        w = self.work
        ready, go = os.path.join(w, "bench.ready"), os.path.join(w, "bench.go")
        bench = shell(f"echo 12 s > {ready}.tmp; mv {ready}.tmp {ready}; while [ ! -e {go} ]; do sleep 0.05; done; date +%s.%N > {w}/timed.start; "
                      "echo 'CHECK|compiled at batch 64|INFO|5 img/s'")
        plan = [
            gpu_check.Check("other", "another check", 20, "-", stamps(w, "other")("sleep 1.5")),
            gpu_check.Check("compile", "compile", 20, "-", bench, ready=ready),
            gpu_check.Check("ours", "ours", 20, "-", stamps(w, "ours")("sleep 0.3"), alone=True),
            gpu_check.Check("compile-timed", "compile timed", 5, "-", None, alone=True, rows="lines",
                            release="compile"),
        ]
        rows, table = self.run_group(plan)
        self.assertEqual([(name, verdict) for name, verdict, _ in rows], [
            ("another check", "PASS"), ("compile", "INFO"), ("ours", "PASS"), ("compiled at batch 64", "INFO")],
            table)
        self.assertIn("ready after 12 s", rows[1][2])
        with open(os.path.join(w, "timed.start")) as f:
            timed = float(f.read())
        self.assertGreaterEqual(timed, times(w, "ours")[1], "the held check was timed beside another")
        self.assertGreaterEqual(timed, times(w, "other")[1])

    def test_a_release_whose_check_never_got_ready_fails_without_running(self):
        ready = os.path.join(self.work, "never.ready")
        plan = [gpu_check.Check("compile", "compile", 1, "-", shell("sleep 30"), ready=ready),
                gpu_check.Check("compile-timed", "compile timed", 5, "-", None, alone=True, rows="lines",
                                release="compile")]
        rows, _ = self.run_group(plan)
        self.assertEqual([verdict for _, verdict, _ in rows], ["FAIL", "FAIL"])
        self.assertIn("did not get ready", rows[1][2])

    def test_stopping_the_runner_keeps_every_finished_row(self):
        driver = os.path.join(self.scratch, "driver.py")
        with open(driver, "w") as f:
            f.write(textwrap.dedent(f"""
                import sys
                sys.path.insert(0, {os.path.join(REPO, 'scripts', 'gpu')!r})
                sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
                import gpu_check, test_gpu_check_runner as t
                c = t.context({os.path.join(self.scratch, 'stopped')!r})
                plan = [gpu_check.Check("done", "finished first", 20, "-", t.shell("echo passed")),
                        gpu_check.Check("hangs", "still running", 60, "-", t.shell("sleep 60"), after=("done",))]
                gpu_check.Group("test", plan, c).run()
                """))
        runner = subprocess.Popen([sys.executable, driver])
        table = os.path.join(self.scratch, "stopped", "log", "table.md")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "| 2 | still running | running |" not in gpu_check.read(table):
            time.sleep(0.1)
        runner.send_signal(signal.SIGTERM)
        self.assertEqual(runner.wait(timeout=30), 1)
        with open(table) as f:
            text = f.read()
        self.assertIn("| 1 | finished first | PASS |", text)
        self.assertIn("| 2 | still running | FAIL | gpu_check.sh was stopped (signal 15) |", text)

    def test_the_worst_case_adds_budgets_along_what_waits_for_what(self):
        plan = [gpu_check.Check("a", "a", 20, "-", None), gpu_check.Check("b", "b", 100, "-", None, after=("a",)),
                gpu_check.Check("c", "c", 30, "-", None), gpu_check.Check("d", "d", 50, "-", None, alone=True)]
        window = gpu_check.worst_case(plan)
        self.assertEqual(window, {"a": (0, 20), "b": (20, 120), "c": (0, 30), "d": (120, 170)})
        with self.assertRaises(ValueError):
            gpu_check.worst_case([gpu_check.Check("a", "a", 1, "-", None, after=("b",)),
                                  gpu_check.Check("b", "b", 1, "-", None)])
        with self.assertRaises(ValueError):
            gpu_check.worst_case([gpu_check.Check("a", "a", 1, "-", None, alone=True),
                                  gpu_check.Check("b", "b", 1, "-", None)])


if __name__ == "__main__":
    unittest.main()
