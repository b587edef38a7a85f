#!/usr/bin/env python3
"""Script mode on one host: a job that names a program (sagemaker_program, or SAGEMAKER_PROGRAM, which wins)
runs it instead of train's own training, in the code folder, with the runner its distribution keys choose;
what it cannot serve is refused before anything runs; its failures are the job's.

    /usr/bin/python3 test_script_mode.py --train build/train

Each test writes a one-host SageMaker job (SAGEMAKER_BASE_DIR, host algo-1) whose code is already in
SAGEMAKER_BASE_DIR/code (as in the SDK's local mode: nothing to fetch) and an empty `train` channel, on which
train's own training would fail ("cannot tell the data's format"): only the program can make the job succeed.
The fetching and installing of the code is tested with the code's own module (tests of user_code).
"""
import json
import os
import subprocess
import sys
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from command_line import paths_and_unittest_argv  # noqa: E402
from job_folder import scratch_job_folder  # noqa: E402

TRAIN = None
LIMIT = 120  # seconds for one run of train: a broken launch fails instead of hanging

# Writes what the program saw, one file per rank.
USER_PROGRAM = textwrap.dedent("""\
    import json, os, sys
    rank = os.environ.get("RANK", "?")
    with open(os.path.join(os.environ["TEST_WORK"], f"seen.{rank}.json"), "w") as out:
        json.dump({"argv": sys.argv, "cwd": os.getcwd(), "environ": dict(os.environ)}, out)
""")

FAILING_PROGRAM = textwrap.dedent("""\
    import os
    def load_the_data(path):
        raise FileNotFoundError(f"no file {path} (the user's own error)")
    if os.environ.get("RANK") == "1":
        load_the_data("/nowhere/data.csv")
""")

OWN_FAILURE_PROGRAM = textwrap.dedent("""\
    import os, sys
    with open(os.path.join(os.environ["SM_OUTPUT_DIR"], "failure"), "w") as out:
        out.write("the program's own reason: loss was NaN at step 7")
    sys.exit(5)
""")

SHELL_PROGRAM = "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > \"$TEST_WORK/shell.txt\"\npwd >> \"$TEST_WORK/shell.txt\"\n"


class ScriptMode(unittest.TestCase):
    def setUp(self):
        self.work, self.base = scratch_job_folder(self, "train-script-mode-test-")
        self.code = os.path.join(self.base, "code")
        os.makedirs(self.code)
        os.makedirs(os.path.join(self.base, "input", "data", "train"))

    def write_job(self, hyperparameters, programs=None):
        config = os.path.join(self.base, "input", "config")
        os.makedirs(config, exist_ok=True)
        documents = {"resourceconfig.json": {"current_host": "algo-1", "hosts": ["algo-1"],
                                             "network_interface_name": "eth0"},
                     # As the SDK's local mode sends them: every value JSON-encoded.
                     "hyperparameters.json": {key: json.dumps(value) for key, value in hyperparameters.items()},
                     "inputdataconfig.json": {"train": {"TrainingInputMode": "File"}}}
        for name, document in documents.items():
            with open(os.path.join(config, name), "w") as file:
                json.dump(document, file)
        for name, text in (programs or {"user.py": USER_PROGRAM}).items():
            with open(os.path.join(self.code, name), "w") as file:
                file.write(text)

    def run_train(self, *arguments, extra=None):
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("OMPI_", "PMIX_", "SM_", "TRAIN_", "SAGEMAKER_"))}
        env.update(SAGEMAKER_BASE_DIR=self.base, TEST_WORK=self.work, **(extra or {}))
        return subprocess.run([TRAIN, *arguments], env=env, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=LIMIT, cwd=self.work)

    def seen(self, rank):
        with open(os.path.join(self.work, f"seen.{rank}.json")) as file:
            return json.load(file)

    def failure(self):
        with open(os.path.join(self.base, "output", "failure")) as file:
            return file.read()

    # --- the program runs, and how ------------------------------------------------------------------------
    def test_the_named_program_runs_instead_of_trains_own_training(self):
        # The job: train's own training would fail on the empty train channel.
        self.write_job({"sagemaker_program": "user.py", "sagemaker_submit_directory": "/opt/ml/code",
                        "epochs": 3, "learning_rate": 0.5})
        result = self.run_train()
        self.assertEqual(result.returncode, 0, result.stdout)
        seen = self.seen(0)
        # The toolkit's command line for a Python program: python3 -- user.py, then the hyperparameters.
        self.assertEqual(seen["argv"], ["user.py", "--epochs", "3", "--learning_rate", "0.5"])
        self.assertEqual(os.path.realpath(seen["cwd"]), os.path.realpath(self.code))
        self.assertEqual(seen["environ"]["SM_USER_ENTRY_POINT"], "user.py")
        self.assertEqual(seen["environ"]["WORLD_SIZE"], "1")
        self.assertNotIn("cannot tell the data's format", result.stdout)
        self.assertIn("runner single process", result.stdout)
        # train's own settings: said to reach only the program.
        self.assertRegex(result.stdout, r"settings \[epochs, learning_rate\] only reach the program")
        self.assertTrue(os.path.exists(os.path.join(self.base, "output", "success")))

    def test_the_program_variable_wins_over_the_hyperparameter(self):
        self.write_job({"sagemaker_program": "missing.py"}, {"user.py": USER_PROGRAM})
        result = self.run_train(extra={"SAGEMAKER_PROGRAM": "user.py"})
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertEqual(self.seen(0)["argv"], ["user.py"])  # a platform key is no argument
        self.assertIn("named by the SAGEMAKER_PROGRAM variable", result.stdout)

    def test_an_executable_runs_as_the_toolkit_runs_it(self):
        self.write_job({"sagemaker_program": "run.sh", "batch-size": 8}, {"run.sh": SHELL_PROGRAM})
        result = self.run_train()
        self.assertEqual(result.returncode, 0, result.stdout)
        with open(os.path.join(self.work, "shell.txt")) as file:
            lines = file.read().splitlines()
        self.assertEqual(lines[:3], ["./run.sh", "--batch-size", "8"])
        self.assertEqual(os.path.realpath(lines[3]), os.path.realpath(self.code))

    def test_validate_says_what_would_run(self):
        self.write_job({"sagemaker_program": "user.py", "sagemaker_mpi_enabled": True,
                        "sagemaker_mpi_num_of_processes_per_host": 2, "num_layers": 50})
        result = subprocess.run([TRAIN, "validate", self.base], text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, timeout=LIMIT)
        self.assertEqual(result.returncode, 0, result.stderr)
        description = json.loads(result.stdout)
        self.assertEqual(description["rank_command"][:3], ["python3", "--", "user.py"])
        self.assertEqual(description["world_size"], 2)
        chosen = "\n".join(description["script_mode"]["chosen"])
        self.assertIn("runner mpi (sagemaker_mpi_enabled): 2 ranks per host on [algo-1]", chosen)
        self.assertIn("is a Python program", chosen)
        self.assertIn("[num_layers]", chosen)

    # --- the runner ------------------------------------------------------------------------------------
    def test_mpi_runs_the_ranks_the_job_asks_for(self):
        self.write_job({"sagemaker_program": "user.py", "sagemaker_mpi_enabled": True,
                        "sagemaker_mpi_num_of_processes_per_host": 2})
        result = self.run_train()
        self.assertEqual(result.returncode, 0, result.stdout)
        for rank in range(2):
            environ = self.seen(rank)["environ"]
            self.assertEqual((environ["RANK"], environ["WORLD_SIZE"], environ["LOCAL_RANK"]), (str(rank), "2", str(rank)))

    def test_torch_distributed_runs_every_rank_with_torchruns_environment(self):
        self.write_job({"sagemaker_program": "user.py", "sagemaker_torch_distributed_enabled": True,
                        "sagemaker_mpi_num_of_processes_per_host": 2})
        result = self.run_train()
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertIn("runner torch_distributed", result.stdout)
        ports = {self.seen(rank)["environ"]["MASTER_PORT"] for rank in range(2)}
        self.assertEqual(len(ports), 1)

    def test_no_distribution_runs_one_process_per_host(self):
        self.write_job({"sagemaker_program": "user.py", "processes_per_host": 2})
        result = self.run_train()
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertEqual(self.seen(0)["environ"]["WORLD_SIZE"], "1")
        self.assertFalse(os.path.exists(os.path.join(self.work, "seen.1.json")))
        self.assertIn("runs once on every training host", result.stdout)

    def test_a_runner_the_image_cannot_serve_is_refused_before_anything_runs(self):
        for key, named in [("sagemaker_distributed_dataparallel_enabled", "smdistributed's data parallel"),
                           ("sagemaker_parameter_server_enabled", "parameter_server")]:
            with self.subTest(key=key):
                # The code would be fetched from S3 first: the refusal comes before that.
                self.write_job({"sagemaker_program": "user.py", key: True,
                                "sagemaker_submit_directory": "s3://no-such-bucket/source.tar.gz"})
                result = self.run_train()
                self.assertEqual(result.returncode, 65, result.stdout)
                failure = self.failure()
                self.assertIn(key, failure)
                self.assertIn(named, failure)
                self.assertIn("use distribution=", failure)
                self.assertFalse(os.path.exists(os.path.join(self.work, "seen.0.json")))
                self.assertNotIn("code: fetching", result.stdout)
                os.remove(os.path.join(self.base, "output", "failure"))

    # --- failures --------------------------------------------------------------------------------------
    def test_a_missing_program_is_named_with_what_the_folder_holds(self):
        self.write_job({"sagemaker_program": "trian.py"}, {"train.py": USER_PROGRAM})
        result = self.run_train()
        self.assertEqual(result.returncode, 65, result.stdout)
        failure = self.failure()
        self.assertIn("trian.py", failure)
        self.assertIn("train.py", failure)

    def test_a_failing_program_is_reported_with_its_rank_code_and_traceback(self):
        self.write_job({"sagemaker_program": "fail.py", "sagemaker_mpi_enabled": True,
                        "sagemaker_mpi_num_of_processes_per_host": 2}, {"fail.py": FAILING_PROGRAM})
        result = self.run_train()
        self.assertEqual(result.returncode, 1, result.stdout)
        failure = self.failure()
        self.assertTrue(failure.startswith("Rank 1 of 2 on host algo-1 exited with code 1."), failure)
        self.assertIn("FileNotFoundError: no file /nowhere/data.csv (the user's own error)", failure)
        self.assertIn("load_the_data", failure)

    def test_a_failure_file_the_program_wrote_is_kept_and_its_exit_code_is_the_jobs(self):
        self.write_job({"sagemaker_program": "own.py"}, {"own.py": OWN_FAILURE_PROGRAM})
        result = self.run_train()
        self.assertEqual(result.returncode, 5, result.stdout)
        self.assertEqual(self.failure(), "the program's own reason: loss was NaN at step 7")


if __name__ == "__main__":
    (TRAIN,), argv = paths_and_unittest_argv("--train")
    unittest.main(argv=argv)
