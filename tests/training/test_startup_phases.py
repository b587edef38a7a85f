"""Where the time goes from `train`'s start to the first step, with the real `train` on this host (a 2-rank
synthetic job):

- rank 0 logs the start-up line once, naming every phase (launch, mpi_init, job_checks, data_index, model,
  communicator, first_batch, first_step) of the slowest rank; the phases add up to its time to the first
  step, which is counted from train's start on the host (TRAIN_STARTED_AT), and the line names the host;
- the launcher logs its own line once, naming its phases (sshd, registration, sshd_probes, mpirun_start,
  ranks_up), which add up to the time its ranks were up, no later than the ranks' first step;
- the timeline of steps 1-2 shows the same eight phases on a start-up track of each rank, one after another,
  before step 1 ends; every file is valid trace-event JSON (tests/support/chrome_trace.py).
No timing bounds: the figures are whatever this machine gives.

Run: /usr/bin/python3 test_startup_phases.py --train PATH
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from chrome_trace import read_trace  # noqa: E402
from command_line import paths_and_unittest_argv  # noqa: E402

TRAIN = None
JOB_LIMIT = 600
RANK_PHASES = ["launch", "mpi_init", "job_checks", "data_index", "model", "communicator", "first_batch", "first_step"]
LAUNCH_PHASES = ["sshd", "registration", "sshd_probes", "mpirun_start", "ranks_up"]
STARTUP = re.compile(r"startup: first step ([\d.]+) s after train started on its host \(slowest: rank (\d+) on (\S+)\):"
                     + "".join(rf" {name}=([\d.]+)" for name in RANK_PHASES) + r"; by host: (.*)$", re.M)
LAUNCHER = re.compile(r"launcher: ranks up ([\d.]+) s after train started on (\S+):"
                      + "".join(rf" {name}=([\d.]+)" for name in LAUNCH_PHASES) + r"$", re.M)


class StartupPhasesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory(prefix="startup-phases-")
        base = cls.work.name
        config = os.path.join(base, "input", "config")
        os.makedirs(config)
        with open(os.path.join(config, "hyperparameters.json"), "w") as f:
            json.dump({"num_layers": "18", "image_shape": "3,32,32", "data_format": "synthetic", "num_classes": "10",
                       "mini_batch_size": "4", "processes_per_host": "2", "max_steps": "2",
                       "timeline_steps": "1-2"}, f)
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("OMPI_", "PMIX_", "SM_", "TRAIN_"))}
        env["SAGEMAKER_BASE_DIR"] = base
        result = subprocess.run([TRAIN], env=env, capture_output=True, text=True, timeout=JOB_LIMIT)
        cls.output = result.stdout + result.stderr
        if result.returncode != 0:
            raise AssertionError(f"the job failed ({result.returncode}):\n{cls.output[-4000:]}")
        cls.timeline = os.path.join(base, "output", "data", "timeline")

    def test_the_ranks_line_appears_once_with_every_phase_and_adds_up(self):
        lines = STARTUP.findall(self.output)
        self.assertEqual(len(lines), 1, self.output[-4000:])
        self.assertEqual(self.output.count("startup: first step"), 1)
        total, rank, host, *phases, by_host = lines[0]
        self.assertIn(int(rank), (0, 1))
        self.assertAlmostEqual(sum(float(p) for p in phases), float(total), delta=0.0005 * len(phases) + 1e-9)
        self.assertTrue(all(float(p) >= 0 for p in phases))
        self.assertGreater(float(phases[0]), 0, "launch: the rank counts from the launcher's start, not its own")
        self.assertEqual(by_host.split(), [f"{host}={float(total):.3f}"])

    def test_the_launchers_line_appears_once_and_adds_up(self):
        lines = LAUNCHER.findall(self.output)
        self.assertEqual(len(lines), 1, self.output[-4000:])
        total, host, *phases = lines[0]
        self.assertAlmostEqual(sum(float(p) for p in phases), float(total), delta=0.0005 * len(phases) + 1e-9)
        # One host: no sshd, no registration, no probes.
        self.assertEqual([float(p) for p in phases[:3]], [0.0, 0.0, 0.0])
        first_step = float(STARTUP.findall(self.output)[0][0])
        self.assertLessEqual(float(total), first_step + 0.001)

    def test_the_timeline_shows_the_phases_before_step_one_ends(self):
        read_trace(os.path.join(self.timeline, "timeline.json"))  # valid trace-event JSON, as Perfetto reads it
        for rank in (0, 1):
            read_trace(os.path.join(self.timeline, f"rank-{rank}.json"))
            with open(os.path.join(self.timeline, f"rank-{rank}.json")) as f:
                document = json.load(f)
            events = document["traceEvents"] if isinstance(document, dict) else document
            phases = [e for e in events if e.get("ph") == "X" and e["name"].startswith("startup: ")]
            self.assertEqual({e["tid"] for e in phases}, {5}, "the start-up track")
            self.assertEqual([e["name"] for e in phases], [f"startup: {name}" for name in RANK_PHASES])
            for before, after in zip(phases, phases[1:]):
                self.assertAlmostEqual(before["ts"] + before["dur"], after["ts"], delta=1.0)  # microseconds
            step_one = [e for e in events if e.get("ph") == "X" and e["name"] == "step 1"]
            self.assertEqual(len(step_one), 1)
            self.assertLessEqual(phases[-2]["ts"] + phases[-2]["dur"], step_one[0]["ts"] + step_one[0]["dur"])


if __name__ == "__main__":
    (TRAIN,), argv = paths_and_unittest_argv("--train")
    unittest.main(argv=argv, verbosity=2)
