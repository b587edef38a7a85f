#!/usr/bin/env python3
"""Tests of scripts/simcluster.py: several simulated hosts on this one machine (run as root).

    python3 tests/cluster/test_simcluster.py [unittest arguments]

They prove what the multi-host tests of `train` rely on: every host has its own hostname, /opt/ml and
/etc/hosts; hosts reach each other by name over ssh with the cluster's key (and only with it); a host's
name can be made to resolve or not; teardown removes every namespace, link, /etc/netns directory and
process, also after an exception and after SIGTERM to the command line; two clusters coexist.

Nothing here is skipped: without root, network namespaces or sshd (openssh-server, scripts/setup.sh) the
run fails, naming what is missing. Every wait has a timeout.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
sys.path.insert(0, SCRIPTS)
import simcluster  # noqa: E402

SIMCLUSTER = os.path.join(SCRIPTS, "simcluster.py")
# The script promises to run with the system's Python (standard library only): the CLI tests use it.
SYSTEM_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
CLI_TIMEOUT = 60.0
STOP_BOUND = 15.0  # SIGTERM to the CLI: everything is gone within this many seconds


def setUpModule():
    problems = []
    if os.geteuid() != 0:
        problems.append("not root (simulated hosts need network namespaces, a bridge and mounts)")
    if not os.access(simcluster.SSHD, os.X_OK):
        problems.append(f"{simcluster.SSHD} missing: install openssh-server (scripts/setup.sh does)")
    for tool in ("ip", "unshare", "nsenter", "ssh", "ssh-keygen", "getent"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            problems.append(f"`{tool}` missing")
    if not problems:
        probe = f"simcluster-probe-{os.getpid()}"
        result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            problems.append(f"`ip netns add` does not work here: {result.stderr.strip()}")
        else:
            subprocess.run(["ip", "netns", "delete", probe], capture_output=True, timeout=30)
    if problems:
        raise RuntimeError("the simulated cluster cannot run on this machine: " + "; ".join(problems))


def write_marker(cluster, host, text):
    with open(os.path.join(cluster.opt_ml(host), "marker"), "w") as f:
        f.write(text)


def assert_nothing_left(test, cluster_id, pids=()):
    test.assertEqual(simcluster.leftovers_of(cluster_id), [], f"cluster {cluster_id} left these behind")
    test.assertFalse(any(d.startswith(cluster_id) for d in os.listdir(simcluster.ETC_NETNS)))
    running = [pid for pid in pids if simcluster.process_is_running(pid)]
    test.assertEqual(running, [], f"processes of cluster {cluster_id} still running")


class ThreeHosts(unittest.TestCase):
    """One cluster of algo-1..algo-3 with sshd on every host, shared by these tests (bring-up is the slow part)."""

    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.TemporaryDirectory(prefix="test-simcluster-")
        cls.cluster = simcluster.SimCluster(3, cls.workdir.name)
        cls.cluster.start()
        try:
            for host in cls.cluster.hosts:
                write_marker(cls.cluster, host, f"marker of {host}")
                cls.cluster.start_sshd(host)
        except BaseException:
            cls.cluster.close(raise_problems=False)
            cls.workdir.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()
        cls.workdir.cleanup()

    def run_on(self, host, argv, **kwargs):
        return self.cluster.run(host, argv, timeout=30, **kwargs)

    def test_each_host_has_its_own_hostname(self):
        for host in self.cluster.hosts:
            self.assertEqual(self.run_on(host, ["hostname"], check=True).stdout.strip(), host)
        self.assertNotIn(os.uname().nodename, self.cluster.hosts, "the machine's own hostname was changed")

    def test_each_host_has_its_own_opt_ml(self):
        for host in self.cluster.hosts:
            self.assertEqual(self.run_on(host, ["cat", "/opt/ml/marker"], check=True).stdout, f"marker of {host}")
        self.assertFalse(os.path.exists("/opt/ml/marker"), "a host wrote through to the machine's /opt/ml")

    def test_every_host_resolves_every_host_to_its_address_on_eth0(self):
        for host in self.cluster.hosts:
            inside = self.run_on(host, ["ip", "-o", "-4", "addr", "show", "dev", "eth0"], check=True).stdout
            self.assertIn(f"inet {self.cluster.address(host)}/24", inside)
            for other in self.cluster.hosts:
                resolved = self.run_on(host, ["getent", "hosts", other], check=True).stdout.split()
                self.assertEqual(resolved[0], self.cluster.address(other), f"{other} as seen from {host}")

    def test_ssh_by_name_with_the_cluster_key(self):
        result = self.run_on("algo-1", ["ssh", "algo-2", "hostname"])
        self.assertEqual((result.returncode, result.stdout.strip()), (0, "algo-2"), result.stderr)
        result = self.run_on("algo-1", ["ssh", "algo-3", "cat", "/opt/ml/marker"])
        self.assertEqual((result.returncode, result.stdout), (0, "marker of algo-3"), result.stderr)

    def test_ssh_commands_run_in_the_target_hosts_namespaces(self):
        # A remote command is a child of algo-2's sshd: it must be one of algo-2's processes.
        result = self.run_on("algo-1", ["ssh", "algo-2", "readlink /proc/self/ns/net /proc/self/ns/uts"])
        self.assertEqual(result.returncode, 0, result.stderr)
        holder = self.cluster.holder_pids["algo-2"]
        expected = [os.readlink(f"/proc/{holder}/ns/net"), os.readlink(f"/proc/{holder}/ns/uts")]
        self.assertEqual(result.stdout.split(), expected)

    def test_ssh_without_the_cluster_key_is_refused(self):
        # Key authentication only: another key (and no password prompt, BatchMode) gets nowhere.
        key = os.path.join(self.workdir.name, "stranger_key")
        if not os.path.exists(key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True, timeout=30)
        # -F /dev/null: without the cluster's client config, which would offer the cluster key as well.
        result = self.run_on("algo-1", ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                                        "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                                        "-i", key, "algo-2", "hostname"])
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("Permission denied", result.stderr)

    def test_pids_lists_the_hosts_own_processes(self):
        sleeper = self.cluster.popen("algo-2", ["sleep", "60"])
        try:
            self.assertIn(sleeper.pid, self.cluster.pids("algo-2"))
            self.assertNotIn(sleeper.pid, self.cluster.pids("algo-1"))
            self.assertNotIn(self.cluster.holder_pids["algo-2"], self.cluster.pids("algo-2"))
            self.assertIn(self.cluster.holder_pids["algo-2"], self.cluster.pids("algo-2", include_holder=True))
        finally:
            sleeper.kill()
            sleeper.wait(timeout=10)

    def test_a_host_made_invisible_does_not_resolve_until_made_visible(self):
        try:
            self.cluster.set_hosts_entry("algo-3", False)
            for host in self.cluster.hosts:
                result = self.run_on(host, ["getent", "hosts", "algo-3"])
                self.assertNotEqual(result.returncode, 0, f"algo-3 still resolves on {host}: {result.stdout}")
            result = self.run_on("algo-1", ["ssh", "algo-3", "true"])
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("algo-3", result.stderr)  # "Could not resolve hostname algo-3"
        finally:
            self.cluster.set_hosts_entry("algo-3", True)
        for host in self.cluster.hosts:
            resolved = self.run_on(host, ["getent", "hosts", "algo-3"], check=True).stdout.split()
            self.assertEqual(resolved[0], self.cluster.address("algo-3"))
        self.assertEqual(self.run_on("algo-1", ["ssh", "algo-3", "hostname"], check=True).stdout.strip(), "algo-3")


class Teardown(unittest.TestCase):
    def test_teardown_after_an_exception_leaves_nothing_behind(self):
        with tempfile.TemporaryDirectory(prefix="test-simcluster-") as workdir:
            started = []
            with self.assertRaisesRegex(RuntimeError, "on purpose"):
                with simcluster.SimCluster(2, workdir) as cluster:
                    for host in cluster.hosts:
                        cluster.start_sshd(host)
                        # One that ignores SIGTERM: teardown must still end it (with SIGKILL).
                        cluster.popen(host, ["sh", "-c", "trap '' TERM; sleep 300 & sleep 300"])
                    time.sleep(0.2)  # the shells have started their sleeps
                    for host in cluster.hosts:
                        started += cluster.pids(host, include_holder=True)
                    self.assertGreaterEqual(len(started), 2 * 5)  # holder (2), sshd, sh, sleep x2 per host
                    namespaces = [cluster.netns(host) for host in cluster.hosts]
                    raise RuntimeError("on purpose")
            assert_nothing_left(self, cluster.id, started)
            for ns in namespaces:
                self.assertFalse(os.path.exists(os.path.join("/run/netns", ns)))
            link = subprocess.run(["ip", "link", "show", cluster.bridge()], capture_output=True, timeout=30)
            self.assertNotEqual(link.returncode, 0, f"bridge {cluster.bridge()} still exists")
            # The work directory, with each host's /opt/ml, outlives the cluster.
            self.assertTrue(os.path.isdir(cluster.opt_ml("algo-1")))

    def test_a_failed_bring_up_is_torn_down_too(self):
        # An interface name too long for Linux fails while the first namespace is being set up.
        with tempfile.TemporaryDirectory(prefix="test-simcluster-") as workdir:
            cluster = simcluster.SimCluster(2, workdir, cluster_id="sc" + os.urandom(2).hex())
            cluster.interface = "x" * 16
            with self.assertRaises(simcluster.SimClusterError):
                cluster.start()
            assert_nothing_left(self, cluster.id)

    def test_two_clusters_at_once(self):
        with tempfile.TemporaryDirectory(prefix="test-simcluster-") as workdir_a, \
                tempfile.TemporaryDirectory(prefix="test-simcluster-") as workdir_b:
            with simcluster.SimCluster(2, workdir_a) as a, simcluster.SimCluster(2, workdir_b) as b:
                self.assertNotEqual(a.id, b.id)
                self.assertNotEqual(a.subnet, b.subnet)
                for cluster, name in ((a, "A"), (b, "B")):
                    write_marker(cluster, "algo-2", f"cluster {name}")
                    for host in cluster.hosts:
                        cluster.start_sshd(host)  # port 22 of the same address in both: separate networks
                for cluster, name in ((a, "A"), (b, "B")):
                    result = cluster.run("algo-1", ["ssh", "algo-2", "hostname; cat /opt/ml/marker"], timeout=30)
                    self.assertEqual((result.returncode, result.stdout), (0, f"algo-2\ncluster {name}"),
                                     result.stderr)
            assert_nothing_left(self, a.id)
            assert_nothing_left(self, b.id)

    def test_other_names_and_another_interface(self):
        with tempfile.TemporaryDirectory(prefix="test-simcluster-") as workdir:
            with simcluster.SimCluster(["node-b", "node-a"], workdir, interface="ens5") as cluster:
                simcluster.write_sagemaker_job(cluster, {"epochs": "2"})
                for host in cluster.hosts:
                    self.assertEqual(cluster.run(host, ["hostname"], check=True).stdout.strip(), host)
                    addresses = cluster.run(host, ["ip", "-o", "-4", "addr", "show", "dev", "ens5"],
                                            check=True).stdout
                    self.assertIn(f"inet {cluster.address(host)}/24", addresses)
                    config = json.loads(cluster.run(host, ["cat", "/opt/ml/input/config/resourceconfig.json"],
                                                    check=True).stdout)
                    self.assertEqual(config["current_host"], host)
                    self.assertEqual(config["hosts"], ["node-a", "node-b"])  # sorted, as SageMaker does
                    self.assertEqual(config["network_interface_name"], "ens5")
            assert_nothing_left(self, cluster.id)


class CommandLine(unittest.TestCase):
    """`simcluster.py run` with a stand-in for `train` (a shell script), run by the system's Python."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test-simcluster-cli-")
        self.addCleanup(self.tmp.cleanup)

    def write_train(self, body):
        path = os.path.join(self.tmp.name, "train.sh")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + textwrap.dedent(body))
        os.chmod(path, 0o755)
        return path

    def run_cli(self, *args):
        result = subprocess.run([SYSTEM_PYTHON, SIMCLUSTER, "run", "--workdir", os.path.join(self.tmp.name, "work"),
                                 *args], capture_output=True, text=True, timeout=CLI_TIMEOUT)
        return result, self.cluster_id(result.stdout)

    def cluster_id(self, output):
        match = re.search(r"cluster (sc[0-9a-f]{4}) up", output)
        self.assertIsNotNone(match, f"no cluster id in the output:\n{output}")
        return match.group(1)

    def opt_ml(self, host):
        return os.path.join(self.tmp.name, "work", host, "opt_ml")

    def test_run_a_sagemaker_job(self):
        train = self.write_train("""\
            echo "$(hostname) $* cwd=$(pwd) HOME=$HOME" > /opt/ml/model/started
            cat /etc/hosts >> /opt/ml/model/started
            [ "$(hostname)" = algo-2 ] && exit 3
            exit 0
            """)
        hyperparameters = os.path.join(self.tmp.name, "hp.json")
        with open(hyperparameters, "w") as f:
            json.dump({"epochs": "3"}, f)
        result, cluster_id = self.run_cli("--hosts", "3", "--train", train, "--hyperparameters", hyperparameters)
        self.assertEqual(result.returncode, 3, result.stdout + result.stderr)  # the first failing host's code
        self.assertRegex(result.stdout, r"algo-1 \(master, [0-9.]+\): exit code 0")
        self.assertRegex(result.stdout, r"algo-2 \(worker, [0-9.]+\): exit code 3")
        for host in ("algo-1", "algo-2", "algo-3"):
            with open(os.path.join(self.opt_ml(host), "model", "started")) as f:
                started = f.read()
            # As SageMaker starts it: `docker run IMAGE train`, in /, with HOME=/root.
            self.assertTrue(started.startswith(f"{host} train cwd=/ HOME=/root\n"), started)
            self.assertIn("\talgo-3\n", started)
            with open(os.path.join(self.opt_ml(host), "input", "config", "hyperparameters.json")) as f:
                self.assertEqual(json.load(f), {"epochs": "3"})
        assert_nothing_left(self, cluster_id)

    def test_run_an_aws_batch_job(self):
        train = self.write_train("""\
            env | grep ^AWS_BATCH_ | sort > /opt/ml/batch_env
            echo "args=$#" >> /opt/ml/batch_env
            """)
        result, cluster_id = self.run_cli("--hosts", "3", "--batch", "--train", train)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        main_address = re.search(r"algo-1: ([0-9.]+) on eth0", result.stdout).group(1)
        for index, host in enumerate(("algo-1", "algo-2", "algo-3")):
            with open(os.path.join(self.opt_ml(host), "batch_env")) as f:
                env = dict(line.split("=", 1) for line in f.read().splitlines())
            self.assertEqual(env["AWS_BATCH_JOB_NODE_INDEX"], str(index))
            self.assertEqual(env["AWS_BATCH_JOB_MAIN_NODE_INDEX"], "0")
            self.assertEqual(env["AWS_BATCH_JOB_NUM_NODES"], "3")
            self.assertEqual(env["args"], "0")
            if index == 0:
                self.assertNotIn("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", env)
            else:
                self.assertEqual(env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"], main_address)
        self.assertFalse(os.path.exists(os.path.join(self.opt_ml("algo-1"), "input", "config")))
        assert_nothing_left(self, cluster_id)

    def test_sigterm_to_the_command_line_stops_train_and_tears_down(self):
        train = self.write_train("""\
            trap 'echo "SIGTERM reached $(hostname)"; exit 143' TERM
            sleep 300 &
            echo $! > /opt/ml/sleep.pid
            echo "running on $(hostname)"
            wait
            """)
        cli = subprocess.Popen([SYSTEM_PYTHON, SIMCLUSTER, "run", "--hosts", "2", "--train", train,
                                "--workdir", os.path.join(self.tmp.name, "work"), "--stop-grace", "5"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        output = ""
        try:
            deadline = time.monotonic() + CLI_TIMEOUT
            while output.count("running on") < 2:  # both hosts' train are up
                self.assertLess(time.monotonic(), deadline, f"train did not start on both hosts:\n{output}")
                line = cli.stdout.readline()
                self.assertTrue(line, f"the command line ended early:\n{output}")
                output += line
            cluster_id = self.cluster_id(output)
            cli.send_signal(signal.SIGTERM)
            rest, _ = cli.communicate(timeout=STOP_BOUND)
            output += rest
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.communicate()
        self.assertEqual(cli.returncode, 128 + signal.SIGTERM, output)
        self.assertIn("[algo-1] SIGTERM reached algo-1", output)
        self.assertIn("[algo-2] SIGTERM reached algo-2", output)
        self.assertIn(f"cluster {cluster_id} torn down", output)
        # The `sleep 300` each train left behind (orphaned when it exited) ended with the teardown.
        sleepers = []
        for host in ("algo-1", "algo-2"):
            with open(os.path.join(self.opt_ml(host), "sleep.pid")) as f:
                sleepers.append(int(f.read()))
        assert_nothing_left(self, cluster_id, sleepers)


if __name__ == "__main__":
    unittest.main(verbosity=2)
