#!/usr/bin/env python3
"""`train -- CMD` against the real SageMaker training toolkit: what a user's program gets from train is what
it gets from sagemaker-training 5.1.4 (PyPI, installed into build-toolkit/ by scripts/setup.sh) for the same
job, byte for byte.

    python3 test_toolkit.py --train build/train --toolkit-python build-toolkit/bin/python

Each test writes a one-host SageMaker job (SAGEMAKER_BASE_DIR, host algo-1; this machine has another name),
runs `train -- python3 dump_rank.py`, whose ranks write down their environment, arguments and
socket.gethostname(), and asks the toolkit (toolkit_view.py: its Environment, to_env_vars(), to_cmd_args()
and MPI runner) about the same folder. Every SM_* variable the toolkit sets, the variables it sets in its
own process, and the arguments it appends must be the rank's, exactly; the rank's host name must be the
job's, as the toolkit's preloaded gethostname library makes it.
"""
import json
import os
import socket
import subprocess
import sys
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from command_line import paths_and_unittest_argv  # noqa: E402
from job_folder import one_host_resource_config, scratch_job_folder  # noqa: E402

TRAIN = None
TOOLKIT_PYTHON = None
LIMIT = 120  # seconds for one run of train or of the toolkit; a broken launch fails instead of hanging

DUMP_RANK = textwrap.dedent("""\
    import json, os, socket, sys
    rank = os.environ["OMPI_COMM_WORLD_RANK"]
    with open(os.path.join(os.environ["TEST_WORK"], f"rank.{rank}.json"), "w") as out:
        json.dump({"environ": dict(os.environ), "argv": sys.argv[1:], "hostname": socket.gethostname()}, out)
""")

# A SageMaker job of one host as SageMaker writes its resourceconfig.json (instance groups included).
ONE_HOST = one_host_resource_config("algo-1")
JOB_ENVIRONMENT = {"TRAINING_JOB_NAME": "toolkit-oracle-001", "AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "us-east-2"}


class ToolkitOracle(unittest.TestCase):
    def setUp(self):
        self.work, self.base = scratch_job_folder(self, "train-toolkit-test-")
        self.dump = os.path.join(self.work, "dump_rank.py")
        with open(self.dump, "w") as file:
            file.write(DUMP_RANK)

    # --- the job, train's ranks and the toolkit's view ---------------------------------------------------
    def write_job(self, hyperparameters, resource_config=ONE_HOST, base=None):
        config = os.path.join(base or self.base, "input", "config")
        os.makedirs(config, exist_ok=True)
        files = {"hyperparameters.json": hyperparameters, "inputdataconfig.json": {"train": {"TrainingInputMode": "File"}}}
        if resource_config is not None:
            files["resourceconfig.json"] = resource_config
        for name, document in files.items():
            with open(os.path.join(config, name), "w") as file:
                file.write(document if isinstance(document, str) else json.dumps(document))
        os.makedirs(os.path.join(base or self.base, "input", "data", "train"), exist_ok=True)

    def environment(self, base=None):
        env = {name: value for name, value in os.environ.items() if not name.startswith("SM_")}
        env.update(JOB_ENVIRONMENT, SAGEMAKER_BASE_DIR=base or self.base, TEST_WORK=self.work)
        return env

    def run_ranks(self, prefix=(), expected_ranks=1):
        """train -- python3 dump_rank.py --mine: each rank's {environ, argv, hostname}, and train's output."""
        result = subprocess.run([*prefix, TRAIN, "--", sys.executable, self.dump, "--mine"], env=self.environment(),
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=LIMIT)
        self.assertEqual(result.returncode, 0, result.stdout)
        ranks = []
        for rank in range(expected_ranks):
            with open(os.path.join(self.work, f"rank.{rank}.json")) as file:
                ranks.append(json.load(file))
        self.assertFalse(os.path.exists(os.path.join(self.work, f"rank.{expected_ranks}.json")), result.stdout)
        return ranks, result.stdout

    def toolkit(self, prefix=(), base=None):
        result = subprocess.run([*prefix, TOOLKIT_PYTHON, os.path.join(HERE, "toolkit_view.py")],
                                env=self.environment(base), cwd=self.work, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, timeout=LIMIT)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def validate(self, base):
        result = subprocess.run([TRAIN, "validate", base, "--", "python3", "x.py"], env=self.environment(base),
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=LIMIT)
        return result

    def assert_rank_sees_the_toolkit(self, rank, view):
        environ = rank["environ"]
        for name, value in sorted(view["env_vars"].items()):
            self.assertEqual(environ.get(name), value, f"{name}: train's rank (first) and the toolkit (second)")
        for name, value in view["os_environ"].items():
            self.assertEqual(environ.get(name), value, name)
        own = {name for name in environ if name.startswith("SM_")}
        self.assertEqual(own, set(view["env_vars"]), "the SM_* variables train sets and the toolkit sets")
        # The command's own arguments, then the toolkit's to_cmd_args().
        self.assertEqual(rank["argv"], ["--mine"] + view["cmd_args"])

    # --- the tests -----------------------------------------------------------------------------------------
    def test_launcher_keys_reach_the_command(self):
        # As the SDK writes them: train reads processes_per_host and custom_mpi_options (and their aliases) for
        # its launcher, and the command still gets every one of them, as the toolkit passes them.
        self.write_job({"processes_per_host": "2", "custom_mpi_options": '"-x FOO=1"',
                        "sagemaker_mpi_num_of_processes_per_host": "2", "sagemaker_mpi_enabled": "true",
                        "sagemaker_mpi_custom_mpi_options": '"-x FOO=1"',
                        "sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://bucket/source.tar.gz"',
                        "sagemaker_region": '"us-west-2"', "sagemaker_job_name": '"oracle"',
                        "sagemaker_container_log_level": "20", "batch-size": "64", "lr": "0.001", "e": "1"})
        ranks, _ = self.run_ranks(expected_ranks=2)
        view = self.toolkit()
        self.assertEqual(view["mpi"]["processes_per_host"], 2)
        for rank in ranks:
            self.assert_rank_sees_the_toolkit(rank, view)
            self.assertEqual(rank["environ"]["SM_HP_PROCESSES_PER_HOST"], "2")
            self.assertEqual(rank["environ"]["SM_HP_CUSTOM_MPI_OPTIONS"], "-x FOO=1")
            self.assertIn("--processes_per_host", rank["argv"])
            self.assertEqual(rank["environ"]["FOO"], "1")  # and train's mpirun took the options

    def test_numbers_and_strings_as_python_writes_them(self):
        # The file as JSON text: raw numbers too (the toolkit keeps what json.loads cannot take, such as a number).
        self.write_job(textwrap.dedent("""\
            {"big": "123456789012345678901234567890", "negative-big": "-98765432109876543210987654321",
             "e15": "1e15", "e16": "1e16", "small": "0.00001", "not-a-number": "NaN", "infinite": "Infinity",
             "overflow": "1E400", "minus-infinity": "-Infinity", "minus-zero": "-0.0", "fraction": "0.1",
             "nested": "{\\"b\\": [1e15, NaN, 123456789012345678901234567890], \\"a\\": {\\"z\\": 1, \\"y\\": \\"\\\\u00e9\\"}}",
             "list": "[\\"it's\\", \\"\\\\u00a0\\", 2.5, null, true]", "text": "not json", "flag": "true",
             "none": "null", "empty": "\\"\\"", "unicode": "\\"caf\\\\u00e9 \\\\ud83d\\\\ude00\\"",
             "raw-number": 1e15, "raw-big": 123456789012345678901234567890, "raw-list": [1, 2.0]}"""))
        ranks, _ = self.run_ranks()
        view = self.toolkit()
        self.assert_rank_sees_the_toolkit(ranks[0], view)
        args = ranks[0]["argv"]
        for key, expected in {"--big": "123456789012345678901234567890", "--e15": "1000000000000000.0",
                              "--not-a-number": "nan", "--infinite": "inf", "--overflow": "inf"}.items():
            self.assertEqual(args[args.index(key) + 1], expected, key)
        self.assertEqual(ranks[0]["environ"]["SM_HP_OVERFLOW"], "Infinity")
        self.assertEqual(ranks[0]["environ"]["SM_HP_NOT-A-NUMBER"], "NaN")

    def test_names_upper_cased_as_python_does_and_the_empty_key(self):
        # Issue 31: SM_HP_ names were upper-cased in ASCII only (SM_HP_GRößE for the toolkit's SM_HP_GRÖSSE), and the
        # empty key's argument was "-" (the toolkit's is "").
        self.write_job({"größe": "1", "ß": "2", "ﬁ": "3", "µ": "4", "ǆ": "5", "ŉ": "6", "ı": "7", "ﬃx": "8",
                        "ΐ": "9", "": "10", "lr": "0.1"})
        ranks, _ = self.run_ranks()
        view = self.toolkit()
        self.assert_rank_sees_the_toolkit(ranks[0], view)
        for name in ("SM_HP_GRÖSSE", "SM_HP_SS", "SM_HP_FI", "SM_HP_Μ", "SM_HP_Ǆ", "SM_HP_ʼN", "SM_HP_I",
                     "SM_HP_FFIX", "SM_HP_\u0399\u0308\u0301", "SM_HP_"):
            self.assertIn(name, ranks[0]["environ"])
        self.assertEqual(ranks[0]["argv"][1:3], ["", "10"])

    def test_what_the_toolkit_cannot_pass_train_refuses(self):
        # Issue 31: a NUL in a key or value was cut in the arguments and SM_HP_X; the toolkit fails on it
        # (Python: "embedded null byte"), train refuses it before any rank starts, naming it.
        self.write_job('{"x": "a\\u0000b", "lr": "0.1"}')
        probe = ("from sagemaker_training import environment; import os, subprocess\n"
                 "env = environment.Environment()\n"
                 "try:\n    os.environ.update(env.to_env_vars())\nexcept ValueError as e:\n    print('env:', e)\n"
                 "try:\n    subprocess.run(['true'] + env.to_cmd_args())\n"
                 "except ValueError as e:\n    print('args:', e)\n")
        toolkit = subprocess.run([TOOLKIT_PYTHON, "-c", probe], env=self.environment(), cwd=self.work, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=LIMIT)
        self.assertEqual(toolkit.stdout, "env: embedded null byte\nargs: embedded null byte\n", toolkit.stderr)
        validated = self.validate(self.base)
        self.assertEqual(validated.returncode, 65, validated.stdout)
        self.assertIn('hyperparameter `x`: its value "a\\u0000b" holds a NUL character', validated.stderr)

    def test_gethostname_answers_with_the_jobs_host_name(self):
        self.write_job({"processes_per_host": "2"})
        ranks, _ = self.run_ranks(expected_ranks=2)
        view = self.toolkit()
        self.assertTrue(view["mpi"]["preload"].endswith(".so"), "the toolkit's MPI runner preloads a library")
        self.assertNotEqual(socket.gethostname(), "algo-1", "this machine must not be called algo-1 for this test")
        for rank in ranks:
            self.assertEqual(rank["hostname"], "algo-1")  # what the toolkit's library answers: current_host
            self.assertTrue(rank["environ"]["LD_PRELOAD"].endswith("libtrain_job_host_name.so"))

    def test_every_cpu_of_the_host_counts(self):
        # Under an affinity mask of one CPU, the toolkit still counts every CPU of the host.
        self.write_job({"lr": "0.1"})
        ranks, _ = self.run_ranks(prefix=("taskset", "-c", "0"))
        view = self.toolkit(prefix=("taskset", "-c", "0"))
        self.assertEqual(ranks[0]["environ"]["SM_NUM_CPUS"], str(view["cpu_count"]))
        self.assertEqual(view["cpu_count"], os.cpu_count())
        self.assert_rank_sees_the_toolkit(ranks[0], view)

    def test_a_missing_resource_config_is_said(self):
        self.write_job({"lr": "0.1"}, resource_config=None)
        ranks, output = self.run_ranks()
        host = socket.gethostname()
        said = f"no resource config found ({self.base}/input/config/resourceconfig.json does not exist)"
        self.assertIn(said, output)
        self.assertIn(f'one-host local job on host "{host}"', output)
        self.assertEqual(ranks[0]["environ"]["SM_CURRENT_HOST"], host)
        validated = self.validate(self.base)
        self.assertEqual(validated.returncode, 0, validated.stderr)
        warnings = json.loads(validated.stdout)["warnings"]
        self.assertTrue(any(said in warning and f'"{host}"' in warning for warning in warnings), warnings)

    def test_heterogeneous_clusters_run_what_the_toolkit_runs(self):
        # Three hosts in two groups, groups' hosts not sorted, each host's view checked offline: the hosts
        # train's mpirun would run on and their master are the toolkit's MPI runner's.
        groups = [{"instance_group_name": "data", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1"]},
                  {"instance_group_name": "gpu", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-3", "algo-2"]}]
        cases = {"named groups": {"sagemaker_distribution_instance_groups": '["gpu"]', "sagemaker_mpi_enabled": "true"},
                 "mpi without groups": {"sagemaker_mpi_enabled": "true"}}
        for case, hyperparameters in cases.items():
            for host, group in (("algo-1", "data"), ("algo-2", "gpu"), ("algo-3", "gpu")):
                with self.subTest(case=case, host=host):
                    base = os.path.join(self.work, case.replace(" ", "-"), host)
                    config = {"current_host": host, "hosts": ["algo-1", "algo-2", "algo-3"],
                              "current_group_name": group, "instance_groups": groups}
                    self.write_job(hyperparameters, config, base=base)
                    view = self.toolkit(base=base)
                    shown = json.loads(self.validate(base).stdout)
                    toolkit_env = json.loads(view["env_vars"]["SM_TRAINING_ENV"])
                    self.assertEqual(shown["master_host"], toolkit_env["master_hostname"])
                    self.assertEqual(shown["is_master"], toolkit_env["is_master"])
                    if shown["this_host_trains"]:
                        self.assertEqual(shown["training_hosts"], toolkit_env["distribution_hosts"])
                    if view["mpi"]["master"]:
                        self.assertEqual(shown["training_hosts"], view["mpi"]["hosts"])
                    self.assertEqual(shown["this_host_trains"], host in toolkit_env["distribution_hosts"])


if __name__ == "__main__":
    (TRAIN, TOOLKIT_PYTHON), argv = paths_and_unittest_argv("--train", "--toolkit-python")
    if not os.access(TOOLKIT_PYTHON, os.X_OK):
        sys.exit(f"{TOOLKIT_PYTHON} is missing: scripts/setup.sh installs the toolkit into build-toolkit/")
    unittest.main(argv=argv, verbosity=2)
