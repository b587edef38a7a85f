#!/usr/bin/python3
"""A simulated cluster: N hosts on this one Linux machine, for tests and for rehearsing a multi-host job.

    sudo python3 scripts/simcluster.py run --hosts 3 [--batch] [--train PATH] [--hyperparameters FILE]
                                           [--data [CHANNEL=]DIR ...] [--sshd] [--keep] [--timeout S]
    sudo python3 scripts/simcluster.py up --hosts 3 [--sshd]      # leaves it running, prints its work directory
    sudo python3 scripts/simcluster.py exec WORKDIR HOST [-- CMD ...]
    sudo python3 scripts/simcluster.py down WORKDIR|CLUSTER_ID

Each simulated host is what a training container sees of its machine:
  - its own network namespace `<id>-<host>` whose interface `eth0` (or another name) is one end of a veth
    pair; the other ends hang on one private Linux bridge `<id>br` in the root namespace. Addresses come
    from a private /24 (10.233.X.0/24) that no interface or route of this machine uses: the hosts get
    .1, .2, ... in the order given, the bridge gets .254 (so this machine can reach the hosts, e.g. to
    see that an sshd answers);
  - its own hostname (UTS namespace): Open MPI names shared-memory segments after the hostname;
  - its own /etc/hosts listing every host (`ip netns exec` bind-mounts /etc/netns/<ns>/hosts), and an
    /etc/resolv.conf naming no real DNS server, so an unknown name fails fast;
  - its own mount namespace with per-host directories bind-mounted over /opt/ml, /root/.ssh (the cluster's
    key pair, authorized_keys and an ssh client config) and /etc/ssh (host keys and an sshd_config, so
    `/usr/sbin/sshd -D -e` works there without flags), and a private tmpfs on /dev/shm.
  A long-lived holder process per host (`ip netns exec NS unshare --uts --mount ... sleep infinity`) owns
  these namespaces; commands enter them with `nsenter -t HOLDER -u -m -n`.

Not simulated: the process ID namespace and /tmp are the machine's, so `ps` on a simulated host lists the
processes of every host (tell a host's own processes by /proc/PID/ns/net), and a file under /tmp is
visible on every host. Every host has the same CPUs, GPUs and memory.

On the real filesystem this creates, when missing, the empty mount points /opt/ml and /root/.ssh (mode
700), the directory /etc/ssh, and /run/sshd (the privilege-separation directory Debian's sshd needs);
and, while a cluster is up, /etc/netns/<id>-<host>/. Everything else lives in the work directory, which
is kept after teardown (it holds each host's /opt/ml: model, output, failure reason).

Needs root, iproute2 (ip), util-linux (unshare, nsenter, mount), hostname, openssh-client (ssh-keygen)
and, for sshd, openssh-server. Python 3 standard library only. As a library:

    sys.path.insert(0, "scripts"); import simcluster
    with simcluster.SimCluster(3, workdir) as cluster:       # or SimCluster(["node-a", "node-b"], ...)
        cluster.start_sshd("algo-2")
        print(cluster.run("algo-1", ["ssh", "algo-2", "hostname"]).stdout)

Leaving the `with` block tears everything down (every process in every host's network namespace, the
namespaces, the bridge, /etc/netns/<ns>), also after an exception.
"""

import argparse
import contextlib
import fcntl
import ipaddress
import json
import os
import random
import re
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

# Bounds on every wait. Generous for a loaded 2-core machine, finite so that a broken setup fails loudly.
TOOL_TIMEOUT = 30.0  # one `ip`, `ssh-keygen`, ... call in the root namespace
HOLDER_READY_TIMEOUT = 20.0  # a host's holder has set its hostname and made its mounts
COMMAND_TIMEOUT = 30.0  # default for SimCluster.run
SSHD_READY_TIMEOUT = 20.0  # sshd accepts connections and sends its banner
TEARDOWN_GRACE = 1.0  # SIGTERM first; whatever is still alive after this gets SIGKILL
TEARDOWN_TIMEOUT = 15.0  # every process in the hosts' network namespaces is gone
JOB_TIMEOUT = 3600.0  # CLI `run`: how long the hosts' `train` may run in all
STOP_GRACE = 30.0  # CLI `run`: after SIGTERM/SIGINT is forwarded to `train`, before teardown

LOCK_PATH = "/run/simcluster.lock"  # serialises choosing a cluster id and subnet between processes
SUBNET_PREFIX = "10.233"  # clusters use 10.233.X.0/24 for a free X
BRIDGE_HOST_NUMBER = 254
ETC_NETNS = "/etc/netns"
STATE_FILE = "simcluster.json"  # in the work directory: what `exec` and `down` need to find the cluster
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SSHD = "/usr/sbin/sshd"  # sshd re-executes itself and therefore must be started by absolute path
HOSTNAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
# Prefixes namespace, bridge and veth names; Linux allows 15 characters for a link ("<id>v253").
CLUSTER_ID_RE = re.compile(r"^[a-z0-9]{2,10}$")
CHANNEL_RE = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The holder's init, run as `sh -c INIT sh HOSTNAME OPT_ML ROOT_SSH ETC_SSH` inside fresh UTS and mount
# namespaces. It prints "ready" once the host looks like a container's machine, then sleeps until killed.
HOLDER_INIT = r"""
set -e
hostname "$1"
mount --bind "$2" /opt/ml
mount --bind "$3" /root/.ssh
mount --bind "$4" /etc/ssh
mount -t tmpfs -o mode=1777 simcluster-shm /dev/shm
echo ready
exec sleep infinity >/dev/null
"""


class SimClusterError(RuntimeError):
    """Bringing up, using or tearing down a simulated cluster failed; the message says what and why."""


# -------------------------------------------------------------------------------------------------------
# Small tools


def run_tool(argv, timeout=TOOL_TIMEOUT, check=True, input=None):
    """Runs a command in the root namespace; raises SimClusterError naming it when it fails or hangs."""
    try:
        result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout,
                                stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SimClusterError(f"`{' '.join(argv)}` did not finish within {timeout:g} s") from None
    except FileNotFoundError:
        raise SimClusterError(f"`{argv[0]}` is not installed (needed for: {' '.join(argv)})") from None
    if check and result.returncode != 0:
        raise SimClusterError(f"`{' '.join(argv)}` failed with exit code {result.returncode}: "
                              f"{(result.stderr or result.stdout).strip()}")
    return result


def write_file(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def tail_of(path, max_chars=2000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-max_chars:].strip()
    except OSError:
        return ""


def describe_exit(returncode):
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by signal {-returncode} ({name})"
    return f"exit code {returncode}"


def process_is_running(pid):
    """True while PID exists and is not a zombie (a zombie has already ended; only its parent's wait is due)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def child_pids(pid):
    pids = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return pids


@contextlib.contextmanager
def signals_deferred():
    """Holds SIGINT/SIGTERM back while teardown runs, so that a second Ctrl-C cannot leave half a cluster."""
    deferred = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, deferred)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def machine_lock(timeout=TOOL_TIMEOUT):
    """An exclusive lock over all simcluster processes on this machine (choosing ids and subnets)."""
    with open(LOCK_PATH, "a") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SimClusterError(f"could not lock {LOCK_PATH} within {timeout:g} s "
                                          "(another simcluster is stuck while bringing up a cluster?)")
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# -------------------------------------------------------------------------------------------------------
# The root namespace: what exists


def list_netns():
    out = run_tool(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def list_links():
    out = run_tool(["ip", "-o", "link", "show"]).stdout
    # "7: scab12v1@if2: <BROADCAST,...>" -> "scab12v1"
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def links_of(cluster_id):
    """The cluster's bridge <id>br and veth ends <id>vN (and <id>pN, not yet moved into a namespace)."""
    pattern = re.compile(rf"^{re.escape(cluster_id)}(br|[vp][0-9]+)$")
    return [link for link in list_links() if pattern.match(link)]


def netns_pids(netns):
    result = run_tool(["ip", "netns", "pids", netns], check=False)
    if result.returncode != 0:
        return []  # the namespace is gone: nothing can run in it
    return [int(p) for p in result.stdout.split()]


def networks_in_use():
    """Every IPv4 network of an interface address or a route of the root namespace."""
    networks = []
    for line in run_tool(["ip", "-o", "-4", "addr", "show"]).stdout.splitlines():
        match = re.search(r"\binet (\S+)", line)
        if match:
            networks.append(ipaddress.ip_network(match.group(1), strict=False))
    for line in run_tool(["ip", "-4", "route", "show", "table", "all"]).stdout.splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("broadcast", "local", "unicast") and len(line.split()) > 1:
            first = line.split()[1]
        with contextlib.suppress(ValueError):
            if first != "default":
                networks.append(ipaddress.ip_network(first, strict=False))
    return networks


def choose_free_subnet():
    """A 10.233.X prefix whose /24 overlaps nothing this machine uses (other clusters' bridges included)."""
    used = networks_in_use()
    for third in range(256):
        candidate = ipaddress.ip_network(f"{SUBNET_PREFIX}.{third}.0/24")
        if not any(candidate.overlaps(network) for network in used):
            return f"{SUBNET_PREFIX}.{third}"
    raise SimClusterError(f"no free /24 left in {SUBNET_PREFIX}.0.0/16 (tear down old clusters: "
                          f"`ip -br addr` lists their bridges, `simcluster.py down ID` removes them)")


def choose_cluster_id():
    """A short id, unique on this machine: it prefixes namespace, bridge and veth names (15 chars max)."""
    existing = set(list_netns()) | set(list_links())
    for _ in range(100):
        cluster_id = "sc" + secrets.token_hex(2)
        if not any(name.startswith(cluster_id) for name in existing):
            return cluster_id
    raise SimClusterError("could not find an unused cluster id")


def ensure_mount_points():
    """The holders bind-mount over these paths; a bind mount needs its target to exist."""
    os.makedirs("/opt/ml", exist_ok=True)
    if not os.path.isdir("/root/.ssh"):
        os.makedirs("/root/.ssh", mode=0o700, exist_ok=True)
    os.makedirs("/etc/ssh", exist_ok=True)
    # Debian's sshd refuses to start without its privilege-separation directory (normally made by the
    # init script or systemd, neither of which runs here). It must be root-owned and not group-writable.
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    os.makedirs(ETC_NETNS, exist_ok=True)


def check_prerequisites():
    if os.geteuid() != 0:
        raise SimClusterError("simcluster needs root (network namespaces, bridges and mounts)")
    missing = [tool for tool in ("ip", "unshare", "nsenter", "mount", "hostname", "ssh-keygen", "sleep")
               if shutil.which(tool) is None]
    if missing:
        raise SimClusterError(f"missing tools: {', '.join(missing)} (Debian: iproute2, util-linux, mount, "
                              "hostname, openssh-client, coreutils)")


def host_names_from(hosts):
    """`3` -> algo-1..algo-3 (SageMaker's names); a list of names is checked and kept in its order."""
    names = [f"algo-{i}" for i in range(1, hosts + 1)] if isinstance(hosts, int) else list(hosts)
    if not 1 <= len(names) <= 253:
        raise SimClusterError(f"a cluster has 1 to 253 hosts, not {len(names)}")
    for name in names:
        if not isinstance(name, str) or not HOSTNAME_RE.match(name):
            raise SimClusterError(f"not a valid host name: {name!r}")
    if len(set(names)) != len(names):
        raise SimClusterError(f"host names repeat: {names}")
    return names


# -------------------------------------------------------------------------------------------------------
# Teardown by naming convention: works for a half-built cluster and from another process (`down`)


def kill_processes_in(namespaces, grace=TEARDOWN_GRACE, timeout=TEARDOWN_TIMEOUT):
    """SIGTERM to every process in the namespaces, SIGKILL to what is left after `grace`, until none is left.

    Returns the pids still there after `timeout` (empty on success)."""
    def alive():
        return [pid for ns in namespaces for pid in netns_pids(ns) if process_is_running(pid)]

    def signal_all(pids, sig):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    pids = alive()
    signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = alive()
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        signal_all(pids, signal.SIGKILL)  # again each round: a process may have forked meanwhile
        time.sleep(0.05)
        pids = alive()
    return pids


def teardown_cluster(cluster_id, grace=TEARDOWN_GRACE, timeout=TEARDOWN_TIMEOUT):
    """Removes everything named after `cluster_id`; returns a list of problems (empty on success)."""
    problems = []
    prefix = f"{cluster_id}-"
    try:
        namespaces = [ns for ns in list_netns() if ns.startswith(prefix)]
    except SimClusterError as e:
        return [str(e)]
    left = kill_processes_in(namespaces, grace, timeout)
    if left:
        problems.append(f"processes still alive after {timeout:g} s in {', '.join(namespaces)}: {left}")
    for ns in namespaces:
        result = run_tool(["ip", "netns", "delete", ns], check=False)
        if result.returncode != 0:
            problems.append(f"`ip netns delete {ns}` failed: {result.stderr.strip()}")
    # Deleting a namespace deletes its end of the veth pair and thereby the other end; a link left over
    # from a bring-up that failed half-way is deleted here, the bridge last.
    for link in sorted(links_of(cluster_id), key=lambda link: link.endswith("br")):
        result = run_tool(["ip", "link", "delete", link], check=False)
        if result.returncode != 0 and link in list_links():
            problems.append(f"`ip link delete {link}` failed: {result.stderr.strip()}")
    with contextlib.suppress(FileNotFoundError):
        for entry in os.listdir(ETC_NETNS):
            if entry.startswith(prefix):
                shutil.rmtree(os.path.join(ETC_NETNS, entry), ignore_errors=True)
                if os.path.exists(os.path.join(ETC_NETNS, entry)):
                    problems.append(f"could not remove {os.path.join(ETC_NETNS, entry)}")
    return problems


def leftovers_of(cluster_id):
    """What of a cluster still exists (for tests and for checking a teardown): a list of descriptions."""
    prefix = f"{cluster_id}-"
    found = [f"network namespace {ns}" for ns in list_netns() if ns.startswith(prefix)]
    found += [f"link {link}" for link in links_of(cluster_id)]
    if os.path.isdir(ETC_NETNS):
        found += [f"directory {ETC_NETNS}/{d}" for d in os.listdir(ETC_NETNS) if d.startswith(prefix)]
    return found


# -------------------------------------------------------------------------------------------------------
# The cluster


class SimCluster:
    """N simulated hosts on this machine. Use as a context manager: leaving it always tears down.

    hosts: a number (names algo-1..algo-N, as SageMaker names them) or a list of host names.
    workdir: where each host's directories go (kept after teardown); None makes a new one under /tmp.
    interface: the interface name inside every host (SageMaker's default network_interface_name is eth0).
    """

    def __init__(self, hosts=3, workdir=None, interface="eth0", cluster_id=None):
        self.hosts = host_names_from(hosts)
        if not HOSTNAME_RE.match(interface) or len(interface) > 15:
            raise SimClusterError(f"not a valid interface name: {interface!r} (at most 15 characters)")
        self.interface = interface
        if cluster_id is not None and not CLUSTER_ID_RE.match(cluster_id):
            raise SimClusterError(f"not a valid cluster id: {cluster_id!r} (2 to 10 of a-z, 0-9)")
        self.id = cluster_id
        self.workdir = os.path.abspath(workdir) if workdir else None
        self.subnet = None  # "10.233.X" once started
        self.holder_pids = {}  # host -> pid of the process whose namespaces are the host's
        self._holders = []  # Popen objects of holders we started (to reap them)
        self._children = []  # Popen objects started by popen() (to reap them)
        self._visible = {host: True for host in self.hosts}
        self._started = False

    # -- life cycle --------------------------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        # With an exception already on its way, a teardown problem is reported, not raised over it.
        self.close(raise_problems=exc_type is None)
        return False

    def start(self):
        """Brings every host up. On any failure, tears down what was made and raises SimClusterError."""
        check_prerequisites()
        ensure_mount_points()
        if self.workdir is None:
            self.workdir = tempfile.mkdtemp(prefix="simcluster-")
        os.makedirs(self.workdir, exist_ok=True)
        with machine_lock():
            self.id = self._unused_cluster_id()
            self._started = True  # from here on, close() has something to undo (and only what is ours)
            with self._torn_down_on_failure():
                self.subnet = choose_free_subnet()
                self._create_bridge()
                for index, host in enumerate(self.hosts):
                    self._create_network_namespace(host, index)
        with self._torn_down_on_failure():
            self._generate_cluster_key()
            for host in self.hosts:
                self._prepare_host_directories(host)
            for host in self.hosts:
                self._start_holder(host)
            for host, holder in zip(self.hosts, self._holders):
                self._wait_for_holder(host, holder)
            self._save_state()
        return self

    @contextlib.contextmanager
    def _torn_down_on_failure(self):
        try:
            yield
        except BaseException:
            self.close(raise_problems=False)
            raise

    def _unused_cluster_id(self):
        if self.id is None:
            return choose_cluster_id()
        if leftovers_of(self.id):  # tearing down on failure would then remove another cluster's things
            raise SimClusterError(f"cluster id {self.id} is in use: {', '.join(leftovers_of(self.id))}")
        return self.id

    def close(self, raise_problems=True):
        """Tears everything down; idempotent. Problems are raised (or, if not raise_problems, printed)."""
        if not self._started:
            return
        with signals_deferred():
            problems = teardown_cluster(self.id) if self.id else []
            for process in self._holders + self._children:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=TEARDOWN_TIMEOUT)  # reap: they were killed above
            self._started = False
        problems += [f"still present: {what}" for what in (leftovers_of(self.id) if self.id else [])]
        if problems:
            message = f"teardown of simulated cluster {self.id} was incomplete:\n  " + "\n  ".join(problems)
            if raise_problems:
                raise SimClusterError(message)
            print(f"simcluster: {message}", file=sys.stderr)

    @classmethod
    def attach(cls, workdir):
        """The cluster that `up` left running in `workdir` (to run commands in it or to tear it down)."""
        path = os.path.join(workdir, STATE_FILE)
        try:
            with open(path) as f:
                state = json.load(f)
        except (OSError, ValueError) as e:
            raise SimClusterError(f"no simulated cluster recorded in {workdir} ({e})") from None
        cluster = cls(state["hosts"], workdir, state["interface"], state["id"])
        cluster.subnet = state["subnet"]
        cluster.holder_pids = {host: int(pid) for host, pid in state["holder_pids"].items()}
        cluster._started = True
        return cluster

    # -- facts -------------------------------------------------------------------------------------------

    def netns(self, host):
        self._check_host(host)
        return f"{self.id}-{host}"

    def address(self, host):
        """The host's IPv4 address on the cluster's private network."""
        self._check_host(host)
        return f"{self.subnet}.{self.hosts.index(host) + 1}"

    def host_dir(self, host):
        """This machine's directory holding everything of `host` (opt_ml, root_ssh, etc_ssh, logs)."""
        self._check_host(host)
        return os.path.join(self.workdir, host)

    def opt_ml(self, host):
        """This machine's path of the directory the host sees as /opt/ml."""
        return os.path.join(self.host_dir(host), "opt_ml")

    def bridge(self):
        return f"{self.id}br"

    # -- running things on a host -----------------------------------------------------------------------

    def host_command(self, host, argv, cwd="/"):
        """The argv that runs `argv` inside the host's namespaces (UTS, mount, network) from this machine."""
        self._check_running(host)
        return ["nsenter", "-t", str(self.holder_pids[host]), "-u", "-m", "-n", f"--wd={cwd}", "--", *argv]

    def environment(self, env=None):
        """A clean environment like a container's: PATH and HOME=/root, plus what the caller passes."""
        return {"PATH": CONTAINER_PATH, "HOME": "/root", **(env or {})}

    def popen(self, host, argv, env=None, stdin=subprocess.DEVNULL, stdout=None, stderr=None, cwd="/",
              **popen_kwargs):
        """Starts `argv` on `host` and returns its subprocess.Popen once it is on the host (in its
        namespaces: pids(host) lists it). Its pid is the program's own (nsenter execs it), so signals
        sent to it reach the program. It runs in a new session (like a container's process: a Ctrl-C in
        this terminal does not reach it) unless start_new_session=False is passed."""
        popen_kwargs.setdefault("start_new_session", True)
        process = subprocess.Popen(self.host_command(host, argv, cwd), env=self.environment(env),
                                   stdin=stdin, stdout=stdout, stderr=stderr, **popen_kwargs)
        self._children.append(process)
        self._wait_until_on_host(process, host)
        return process

    def _wait_until_on_host(self, process, host, timeout=TOOL_TIMEOUT):
        """Waits until nsenter has entered the host's mount namespace (it enters it last, then execs)."""
        try:
            holder_mnt = os.readlink(f"/proc/{self.holder_pids[host]}/ns/mnt")
        except OSError:
            process.kill()
            raise SimClusterError(f"host {host} is down: its holder (pid {self.holder_pids[host]}) is gone") \
                from None
        deadline = time.monotonic() + timeout
        while process.poll() is None:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{process.pid}/ns/mnt") == holder_mnt:
                    return
            if time.monotonic() > deadline:
                process.kill()
                raise SimClusterError(f"a process started on {host} did not enter its namespaces within "
                                      f"{timeout:g} s")
            time.sleep(0.002)

    def run(self, host, argv, timeout=COMMAND_TIMEOUT, env=None, input=None, check=False):
        """Runs `argv` on `host` to completion; returns subprocess.CompletedProcess with text stdout/stderr.

        Raises SimClusterError if it does not finish within `timeout` s (it is killed) or, with check=True,
        if it exits non-zero."""
        process = self.popen(host, argv, env=env, stdin=subprocess.PIPE if input is not None else
                             subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            stdout, stderr = process.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            raise SimClusterError(f"`{' '.join(argv)}` on {host} did not finish within {timeout:g} s; "
                                  f"stdout: {stdout.strip()!r}, stderr: {stderr.strip()!r}") from None
        result = subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)
        if check and result.returncode != 0:
            raise SimClusterError(f"`{' '.join(argv)}` on {host} ended with {describe_exit(result.returncode)}"
                                  f"; stderr: {stderr.strip()!r}")
        return result

    def start_sshd(self, host, timeout=SSHD_READY_TIMEOUT):
        """Starts `/usr/sbin/sshd -D -e` on `host` (as `train` does on a multi-host job), waits until it
        answers on port 22, and returns its Popen. Its log is <host_dir>/sshd.log."""
        if not os.path.exists(SSHD):
            raise SimClusterError(f"{SSHD} is missing: install openssh-server (scripts/setup.sh does)")
        log_path = os.path.join(self.host_dir(host), "sshd.log")
        with open(log_path, "ab") as log:
            process = self.popen(host, [SSHD, "-D", "-e"], stdout=log, stderr=subprocess.STDOUT)
        self.wait_for_port(host, 22, timeout, process=process, log_path=log_path, what="sshd")
        return process

    def wait_for_port(self, host, port, timeout, process=None, log_path=None, what="a server"):
        """Waits until something accepts TCP connections on the host's address:port (from this machine,
        through the bridge); for sshd, until it has sent its banner."""
        address = self.address(host)
        deadline = time.monotonic() + timeout
        last_error = None
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise SimClusterError(f"{what} on {host} ended ({describe_exit(process.returncode)}) before "
                                      f"answering on {address}:{port}; its log: {tail_of(log_path)}")
            try:
                with socket.create_connection((address, port), timeout=1.0) as connection:
                    if port != 22 or connection.recv(8).startswith(b"SSH-"):
                        return
            except OSError as e:
                last_error = e
            time.sleep(0.05)
        raise SimClusterError(f"{what} on {host} did not answer on {address}:{port} within {timeout:g} s "
                              f"(last error: {last_error}); its log: {tail_of(log_path) if log_path else '-'}")

    def pids(self, host, include_holder=False):
        """The processes running in the host's network namespace (the host's processes), the holder's
        excluded unless include_holder. Zombies are not listed."""
        self._check_running(host)
        holder = {self.holder_pids[host], *child_pids(self.holder_pids[host])}
        return [pid for pid in netns_pids(self.netns(host))
                if process_is_running(pid) and (include_holder or pid not in holder)]

    # -- name resolution ---------------------------------------------------------------------------------

    def set_hosts_entry(self, host, visible):
        """Makes `host`'s name resolve (visible=True) or not on every host, as when SageMaker's DNS
        entries appear late. The hosts files are rewritten in place: they are bind-mounted by inode."""
        self._check_host(host)
        self._visible[host] = bool(visible)
        for each in self.hosts:
            self._write_hosts_file(each)

    def hosts_file_text(self):
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{self.address(h)}\t{h}" for h in self.hosts if self._visible[h]]
        return "\n".join(lines) + "\n"

    # -- internals ---------------------------------------------------------------------------------------

    def _check_host(self, host):
        if host not in self.hosts:
            raise SimClusterError(f"no host {host!r} in this cluster (hosts: {', '.join(self.hosts)})")

    def _check_running(self, host):
        self._check_host(host)
        if not self._started or host not in self.holder_pids:
            raise SimClusterError(f"host {host} is not up (use the cluster inside `with SimCluster(...)`)")

    def _etc_netns(self, host):
        return os.path.join(ETC_NETNS, self.netns(host))

    def _create_bridge(self):
        bridge = self.bridge()
        run_tool(["ip", "link", "add", bridge, "type", "bridge"])
        run_tool(["ip", "addr", "add", f"{self.subnet}.{BRIDGE_HOST_NUMBER}/24", "dev", bridge])
        run_tool(["ip", "link", "set", bridge, "up"])

    def _create_network_namespace(self, host, index):
        ns = self.netns(host)
        outside, inside = f"{self.id}v{index + 1}", f"{self.id}p{index + 1}"
        run_tool(["ip", "netns", "add", ns])
        run_tool(["ip", "link", "add", outside, "type", "veth", "peer", "name", inside])
        run_tool(["ip", "link", "set", outside, "master", self.bridge()])
        run_tool(["ip", "link", "set", outside, "up"])
        # Made under a temporary name and renamed inside: the root namespace may have its own eth0.
        run_tool(["ip", "link", "set", inside, "netns", ns])
        run_tool(["ip", "-n", ns, "link", "set", inside, "name", self.interface])
        run_tool(["ip", "-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", self.interface])
        run_tool(["ip", "-n", ns, "link", "set", self.interface, "up"])
        run_tool(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _generate_cluster_key(self):
        key_dir = os.path.join(self.workdir, "cluster_key")
        os.makedirs(key_dir, mode=0o700, exist_ok=True)
        key = os.path.join(key_dir, "id_ed25519")
        for path in (key, key + ".pub"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        run_tool(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"simcluster-{self.id}", "-f", key])

    def _prepare_host_directories(self, host):
        base = self.host_dir(host)
        # Empty: write_sagemaker_job makes SageMaker's layout; an AWS Batch container has no /opt/ml at all.
        os.makedirs(os.path.join(base, "opt_ml"), exist_ok=True)
        self._write_root_ssh(host, os.path.join(base, "root_ssh"))
        self._write_etc_ssh(host, os.path.join(base, "etc_ssh"))
        os.makedirs(self._etc_netns(host), exist_ok=True)
        self._write_hosts_file(host)
        # No real DNS server inside a host: a name not in /etc/hosts fails at once instead of timing out.
        write_file(os.path.join(self._etc_netns(host), "resolv.conf"),
                   "# simcluster: names come from /etc/hosts only\nnameserver 127.0.0.1\n"
                   "options timeout:1 attempts:1\n")

    def _write_hosts_file(self, host):
        # Opened for writing (truncated), never replaced: `ip netns exec` bind-mounted this very inode.
        with open(os.path.join(self._etc_netns(host), "hosts"), "w") as f:
            f.write(self.hosts_file_text())

    def _write_root_ssh(self, host, root_ssh):
        os.makedirs(root_ssh, exist_ok=True)
        os.chmod(root_ssh, 0o700)  # sshd's StrictModes rejects keys in a group- or world-writable .ssh
        key_dir = os.path.join(self.workdir, "cluster_key")
        with open(os.path.join(key_dir, "id_ed25519")) as f:
            private_key = f.read()
        with open(os.path.join(key_dir, "id_ed25519.pub")) as f:
            public_key = f.read()
        write_file(os.path.join(root_ssh, "id_ed25519"), private_key, 0o600)
        write_file(os.path.join(root_ssh, "id_ed25519.pub"), public_key, 0o644)
        write_file(os.path.join(root_ssh, "authorized_keys"), public_key, 0o600)
        # Host keys change with every cluster, so none is remembered or checked; BatchMode makes ssh fail
        # rather than wait for a password prompt nobody answers.
        write_file(os.path.join(root_ssh, "config"),
                   "Host *\n"
                   "    IdentityFile ~/.ssh/id_ed25519\n"
                   "    StrictHostKeyChecking no\n"
                   "    UserKnownHostsFile /dev/null\n"
                   "    LogLevel ERROR\n"
                   "    BatchMode yes\n"
                   "    ConnectTimeout 10\n", 0o600)

    def _write_etc_ssh(self, host, etc_ssh):
        os.makedirs(etc_ssh, exist_ok=True)
        host_key = os.path.join(etc_ssh, "ssh_host_ed25519_key")
        if not os.path.exists(host_key):
            run_tool(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{host}", "-f", host_key])
        if os.path.exists("/etc/ssh/moduli"):  # the real one: this runs before any bind mount
            shutil.copyfile("/etc/ssh/moduli", os.path.join(etc_ssh, "moduli"))
        write_file(os.path.join(etc_ssh, "sshd_config"),
                   f"# simcluster: sshd of simulated host {host}; started as `{SSHD} -D -e`\n"
                   "Port 22\n"
                   "HostKey /etc/ssh/ssh_host_ed25519_key\n"
                   "PermitRootLogin prohibit-password\n"
                   "PubkeyAuthentication yes\n"
                   "AuthorizedKeysFile .ssh/authorized_keys\n"
                   "PasswordAuthentication no\n"
                   "KbdInteractiveAuthentication no\n"
                   "UsePAM no\n"
                   "PermitUserEnvironment no\n"
                   "AcceptEnv LANG LC_*\n"
                   "X11Forwarding no\n"
                   "PrintMotd no\n"
                   "UseDNS no\n"
                   # Every host's sshd would otherwise write the machine's one /run/sshd.pid.
                   "PidFile none\n"
                   # mpirun may connect to every host at once; sshd's default starts refusing at 10.
                   "MaxStartups 200:30:400\n"
                   "Subsystem sftp /usr/lib/openssh/sftp-server\n")
        # The ssh client reads /etc/ssh/ssh_config, which is now this directory's: keep it minimal.
        write_file(os.path.join(etc_ssh, "ssh_config"), "Host *\n    SendEnv LANG LC_*\n")

    def _start_holder(self, host):
        base = self.host_dir(host)
        log = open(os.path.join(base, "holder.log"), "wb")
        with log:
            holder = subprocess.Popen(
                ["ip", "netns", "exec", self.netns(host),  # execs (no fork): the pid below is unshare's
                 "unshare", "--uts", "--mount", "--propagation", "private", "--fork", "--kill-child",
                 "sh", "-c", HOLDER_INIT, "sh", host, os.path.join(base, "opt_ml"),
                 os.path.join(base, "root_ssh"), os.path.join(base, "etc_ssh")],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=self.environment(),
                start_new_session=True)  # survives this process (`up`) and its terminal's Ctrl-C
        self._holders.append(holder)
        self.holder_pids[host] = holder.pid

    def _wait_for_holder(self, host, holder, timeout=HOLDER_READY_TIMEOUT):
        """Waits for the holder's "ready" line: by then unshare (holder.pid) is in the host's namespaces
        and the hostname and mounts are in place."""
        output = b""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(holder.stdout, selectors.EVENT_READ)
            while b"ready\n" not in output:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SimClusterError(f"host {host} was not ready within {timeout:g} s; holder log: "
                                          f"{tail_of(os.path.join(self.host_dir(host), 'holder.log'))}")
                if selector.select(remaining):
                    chunk = os.read(holder.stdout.fileno(), 4096)
                    if not chunk:
                        holder.wait(timeout=TOOL_TIMEOUT)
                        raise SimClusterError(
                            f"host {host}'s holder ended ({describe_exit(holder.returncode)}) before it was "
                            f"ready; its log: {tail_of(os.path.join(self.host_dir(host), 'holder.log'))}")
                    output += chunk
        holder.stdout.close()

    def _save_state(self):
        state = {"id": self.id, "hosts": self.hosts, "interface": self.interface, "subnet": self.subnet,
                 "holder_pids": self.holder_pids, "addresses": {h: self.address(h) for h in self.hosts}}
        write_file(os.path.join(self.workdir, STATE_FILE), json.dumps(state, indent=2) + "\n")


# -------------------------------------------------------------------------------------------------------
# Jobs: SageMaker's /opt/ml/input/config and AWS Batch's environment


def sdk_encoded_hyperparameters(values):
    """Hyperparameters as the SageMaker Python SDK sends them: every value JSON-encoded into a string."""
    return {key: json.dumps(value) for key, value in values.items()}


def write_sagemaker_job(cluster, hyperparameters=None, input_data_config=None, network_interface_name=None,
                        instance_type="ml.c5.xlarge", instance_groups=None, hosts=None):
    """Writes /opt/ml/input/config/{resourceconfig,hyperparameters,inputdataconfig}.json on every host of
    the job: `hosts`, by default all the cluster's (the others are then outside the job, on its network).

    hyperparameters and input_data_config are written as given (hyperparameters' values should be strings,
    as SageMaker's are; see sdk_encoded_hyperparameters). network_interface_name defaults to the cluster's
    interface (pass another to rehearse a wrong one). instance_groups makes a heterogeneous cluster: a list of
    {"name": ..., "hosts": [...], "instance_type": ...} covering every host; by default all hosts are one
    group, "homogeneousCluster"."""
    job_hosts = list(hosts or cluster.hosts)
    groups = instance_groups or [{"name": "homogeneousCluster", "hosts": job_hosts,
                                  "instance_type": instance_type}]
    for host in job_hosts:
        group = next(g for g in groups if host in g["hosts"])
        resource_config = {
            "current_host": host,
            "current_instance_type": group["instance_type"],
            "current_group_name": group["name"],
            "hosts": sorted(job_hosts),  # SageMaker sorts as strings: algo-10 before algo-2
            "instance_groups": [{"instance_group_name": g["name"], "instance_type": g["instance_type"],
                                 "hosts": list(g["hosts"])} for g in groups],  # not sorted, as on SageMaker
            "network_interface_name": network_interface_name or cluster.interface,
        }
        for sub in ("input/data", "model", "output/data"):  # what SageMaker makes before the job starts
            os.makedirs(os.path.join(cluster.opt_ml(host), sub), exist_ok=True)
        config_dir = os.path.join(cluster.opt_ml(host), "input", "config")
        os.makedirs(config_dir, exist_ok=True)
        write_json(os.path.join(config_dir, "resourceconfig.json"), resource_config)
        write_json(os.path.join(config_dir, "hyperparameters.json"), hyperparameters or {})
        write_json(os.path.join(config_dir, "inputdataconfig.json"), input_data_config or {})


def write_json(path, value):
    write_file(path, json.dumps(value, indent=2) + "\n")


def batch_environment(cluster, host, main_index=0, num_nodes=None):
    """The AWS Batch multi-node variables of `host` (node index = its position in cluster.hosts) in a job of
    `num_nodes` nodes, by default all the cluster's hosts (fewer: the first ones)."""
    index = cluster.hosts.index(host)
    env = {"AWS_BATCH_JOB_NODE_INDEX": str(index), "AWS_BATCH_JOB_MAIN_NODE_INDEX": str(main_index),
           "AWS_BATCH_JOB_NUM_NODES": str(num_nodes or len(cluster.hosts)), "AWS_BATCH_JOB_ATTEMPT": "1",
           "AWS_BATCH_JOB_ID": f"simcluster-{cluster.id}#{index}"}
    if index != main_index:  # only the children are told where the main node is
        env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = cluster.address(cluster.hosts[main_index])
    return env


def clear_job(cluster, channel="train"):
    """Undoes an earlier job on every host: its channel's mount and /opt/ml's input, model, output and
    checkpoints, so that the next job starts as on a fresh instance."""
    for host in cluster.hosts:
        opt_ml = cluster.opt_ml(host)
        if os.path.ismount(os.path.join(opt_ml, "input", "data", channel)):
            cluster.run(host, ["umount", f"/opt/ml/input/data/{channel}"], check=True)
        for sub in ("input", "model", "output", "checkpoints"):
            shutil.rmtree(os.path.join(opt_ml, sub), ignore_errors=True)


def bind_data_channel(cluster, host, channel, directory):
    """Makes `directory` (this machine's) the host's /opt/ml/input/data/<channel>, read-only."""
    if not CHANNEL_RE.match(channel):
        raise SimClusterError(f"not a valid channel name: {channel!r} ([A-Za-z0-9.-_], 1 to 64 characters)")
    os.makedirs(os.path.join(cluster.opt_ml(host), "input", "data", channel), exist_ok=True)
    cluster.run(host, ["mount", "-o", "bind,ro", os.path.abspath(directory),
                       f"/opt/ml/input/data/{channel}"], check=True)


# -------------------------------------------------------------------------------------------------------
# Command line


class Interrupted(Exception):
    """SIGTERM or SIGINT reached the command line (raised by its handler, so that teardown runs)."""

    def __init__(self, signum):
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(self.name)


def raise_interrupted(signum, frame):
    raise Interrupted(signum)


def relay_output(host, stream, log_path, lock):
    """Copies a host's output line by line to our stdout, prefixed with the host, and to its log file."""
    prefix = f"[{host}] ".encode()
    with open(log_path, "ab") as log:
        for line in iter(stream.readline, b""):
            log.write(line)
            log.flush()
            if not line.endswith(b"\n"):
                line += b"\n"
            with lock:
                sys.stdout.buffer.write(prefix + line)
                sys.stdout.buffer.flush()


def parse_data_arguments(values):
    channels = {}
    for value in values or []:
        channel, directory = value.split("=", 1) if "=" in value else ("training", value)
        if not os.path.isdir(directory):
            raise SimClusterError(f"--data {value}: {directory} is not a directory")
        if not CHANNEL_RE.match(channel):
            raise SimClusterError(f"--data {value}: not a valid channel name: {channel!r}")
        channels[channel] = directory
    return channels


def read_hyperparameters(path):
    if not path:
        return {}
    try:
        with open(path) as f:
            values = json.load(f)
    except (OSError, ValueError) as e:
        raise SimClusterError(f"--hyperparameters {path}: {e}") from None
    if not isinstance(values, dict):
        raise SimClusterError(f"--hyperparameters {path}: must hold a JSON object")
    return values


def start_trains(cluster, args, train_argv):
    """Starts `train` on every host as a container starts it: cwd /, PATH, HOME, HOSTNAME (+ Batch vars)."""
    hosts = list(cluster.hosts)
    if args.batch:  # Batch starts the main node first and the children in any order
        hosts = hosts[:1] + random.sample(hosts[1:], len(hosts) - 1)
    processes, relays, lock = {}, [], threading.Lock()
    for host in hosts:
        env = {"HOSTNAME": host, **(batch_environment(cluster, host) if args.batch else {})}
        processes[host] = cluster.popen(host, train_argv, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT)
        relay = threading.Thread(target=relay_output, daemon=True, args=(
            host, processes[host].stdout, os.path.join(cluster.host_dir(host), "train.log"), lock))
        relay.start()
        relays.append(relay)
        print(f"simcluster: started {' '.join(train_argv)} on {host} (pid {processes[host].pid})", flush=True)
    return processes, relays


def wait_for_trains(cluster, processes, args):
    """Waits for every host's train (SageMaker) or for the main node's (Batch: the job ends with it).

    Returns "done", "timeout", or the name of the signal that stopped this command."""
    deadline = time.monotonic() + args.timeout
    main = cluster.hosts[0]

    def done():
        if args.batch and processes[main].poll() is not None:
            return True
        return all(p.poll() is not None for p in processes.values())

    try:
        while not done():
            if time.monotonic() > deadline:
                print(f"simcluster: train still running after {args.timeout:g} s (--timeout): stopping it",
                      flush=True)
                return "timeout"
            time.sleep(0.1)
    except Interrupted as interrupted:
        print(f"simcluster: {interrupted}: sending SIGTERM to train on every host (as SageMaker stops a job);"
              f" teardown in at most {args.stop_grace:g} s", flush=True)
        for process in processes.values():
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        stop_deadline = time.monotonic() + args.stop_grace
        while time.monotonic() < stop_deadline and not all(p.poll() is not None for p in processes.values()):
            time.sleep(0.1)
        return interrupted.name  # "SIGTERM" or "SIGINT"
    if args.batch:  # the children get a moment to finish on their own before teardown ends them
        child_deadline = time.monotonic() + min(args.stop_grace, 10.0)
        while time.monotonic() < child_deadline and not all(p.poll() is not None for p in processes.values()):
            time.sleep(0.1)
    return "done"


def report_trains(cluster, processes, outcome, batch):
    print("simcluster: results", flush=True)
    for host in cluster.hosts:
        role = ("main node" if host == cluster.hosts[0] else "child") if batch else \
               ("master" if host == sorted(cluster.hosts)[0] else "worker")
        print(f"  {host} ({role}, {cluster.address(host)}): {describe_exit(processes[host].poll())}; "
              f"/opt/ml is {cluster.opt_ml(host)}; output in {os.path.join(cluster.host_dir(host), 'train.log')}",
              flush=True)
    if outcome == "timeout":
        return 124
    if outcome.startswith("SIG"):  # stopped by a signal to this command: the shell's convention
        return 128 + signal.Signals[outcome].value
    codes = [processes[cluster.hosts[0]].returncode] if batch else \
            [processes[h].returncode for h in sorted(cluster.hosts)]
    for code in codes:
        if code:
            return code if code > 0 else 128 - code
    return 0


def command_run(args):
    train = os.path.abspath(args.train)
    if not os.access(train, os.X_OK):
        raise SimClusterError(f"--train {args.train}: not an executable file (build it first: scripts/setup.sh)")
    # SageMaker starts the container as `docker run IMAGE train`: the entrypoint gets the argument "train".
    # Batch runs the entrypoint with the job definition's command, here none.
    train_argv = [train] + (args.train_args if args.train_args else ([] if args.batch else ["train"]))
    hyperparameters = read_hyperparameters(args.hyperparameters)
    channels = parse_data_arguments(args.data)
    cluster = SimCluster(args.host_names or args.hosts, args.workdir, args.interface)
    cluster.start()
    processes, relays, outcome = {}, [], "failed"
    try:
        print_cluster(cluster)
        prepare_job(cluster, args, hyperparameters, channels)
        processes, relays = start_trains(cluster, args, train_argv)
        outcome = wait_for_trains(cluster, processes, args)
        if args.keep and outcome == "done":
            return leave_running(cluster, processes, relays, args)
    finally:
        # Teardown first: a process that train left behind may hold its output pipe open until then.
        cluster.close(raise_problems=False)
        if cluster.id and not cluster._started:
            print(f"simcluster: cluster {cluster.id} torn down; work directory kept: {cluster.workdir}",
                  flush=True)
    for relay in relays:
        relay.join(timeout=5)
    return report_trains(cluster, processes, outcome, args.batch)


def prepare_job(cluster, args, hyperparameters, channels):
    """The job description every host finds (SageMaker's files), its data channels, and sshd if asked."""
    input_data_config = {channel: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                                   "RecordWrapperType": "None"} for channel in channels}
    if not args.batch:
        write_sagemaker_job(cluster, hyperparameters, input_data_config, args.network_interface_name)
    else:  # a Batch container has no /opt/ml/input/config; write only what was asked for
        for host in cluster.hosts:
            config_dir = os.path.join(cluster.opt_ml(host), "input", "config")
            if hyperparameters or channels:
                os.makedirs(config_dir, exist_ok=True)
            if hyperparameters:
                write_json(os.path.join(config_dir, "hyperparameters.json"), hyperparameters)
            if channels:
                write_json(os.path.join(config_dir, "inputdataconfig.json"), input_data_config)
    for host in cluster.hosts:
        for channel, directory in channels.items():
            bind_data_channel(cluster, host, channel, directory)
        if args.sshd:
            cluster.start_sshd(host)


def leave_running(cluster, processes, relays, args):
    """--keep: reports, then forgets the cluster so that this process's teardown leaves it up."""
    for relay in relays:
        relay.join(timeout=1)
    code = report_trains(cluster, processes, "done", args.batch)
    cluster._holders, cluster._children, cluster._started = [], [], False
    print(f"simcluster: --keep: cluster {cluster.id} left running; enter a host with\n"
          f"  {sys.argv[0]} exec {cluster.workdir} {cluster.hosts[0]}\n"
          f"and remove it with\n  {sys.argv[0]} down {cluster.workdir}", flush=True)
    return code


def print_cluster(cluster):
    print(f"simcluster: cluster {cluster.id} up, work directory {cluster.workdir}", flush=True)
    for host in cluster.hosts:
        print(f"  {host}: {cluster.address(host)} on {cluster.interface}, network namespace "
              f"{cluster.netns(host)}, /opt/ml is {cluster.opt_ml(host)}", flush=True)


def command_up(args):
    cluster = SimCluster(args.host_names or args.hosts, args.workdir, args.interface)
    cluster.start()
    try:
        write_sagemaker_job(cluster)
        if args.sshd:
            for host in cluster.hosts:
                cluster.start_sshd(host)
    except BaseException:
        cluster.close(raise_problems=False)
        raise
    print_cluster(cluster)
    print(f"enter a host:  {sys.argv[0]} exec {cluster.workdir} {cluster.hosts[0]} [-- COMMAND]\n"
          f"tear down:     {sys.argv[0]} down {cluster.workdir}", flush=True)
    return 0


def command_exec(args):
    cluster = SimCluster.attach(args.workdir)
    argv = args.command or ["/bin/bash", "-l"]
    env = cluster.environment({"HOSTNAME": args.host, "TERM": os.environ.get("TERM", "dumb")})
    os.execvpe("nsenter", cluster.host_command(args.host, argv), env)


def command_down(args):
    if os.path.isdir(args.cluster):
        cluster_id = SimCluster.attach(args.cluster).id
    elif re.match(r"^sc[0-9a-f]{4}$", args.cluster):
        cluster_id = args.cluster
    else:
        raise SimClusterError(f"{args.cluster}: neither a work directory of `up` nor a cluster id like sc1a2b")
    with signals_deferred():
        problems = teardown_cluster(cluster_id) + [f"still present: {x}" for x in leftovers_of(cluster_id)]
    if problems:
        raise SimClusterError("teardown incomplete:\n  " + "\n  ".join(problems))
    print(f"simcluster: cluster {cluster_id} torn down", flush=True)
    return 0


def add_cluster_arguments(parser):
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--hosts", type=int, default=3, help="number of hosts, named algo-1..algo-N (default 3)")
    group.add_argument("--host-names", type=lambda s: s.split(","), help="comma-separated host names instead")
    parser.add_argument("--interface", default="eth0", help="interface name inside each host (default eth0)")
    parser.add_argument("--workdir", help="work directory (default: a new /tmp/simcluster-*)")
    parser.add_argument("--sshd", action="store_true", help="start sshd on every host (train starts its own)")


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="simcluster.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="subcommand", required=True)

    run = commands.add_parser("run", help="bring up a cluster, run train on every host, tear down")
    add_cluster_arguments(run)
    run.add_argument("--batch", action="store_true", help="an AWS Batch multi-node job instead of SageMaker")
    run.add_argument("--train", default=os.path.join(REPO_ROOT, "build", "train"),
                     help="the program every host starts (default: build/train of this repository)")
    run.add_argument("--hyperparameters", help="a JSON file: the job's hyperparameters.json, copied as is")
    run.add_argument("--data", action="append", metavar="[CHANNEL=]DIR",
                     help="a data channel (default name: training), bind-mounted read-only; repeatable")
    run.add_argument("--network-interface-name", help="resourceconfig's network_interface_name "
                     "(default: --interface; set another to rehearse a wrong one)")
    run.add_argument("--timeout", type=float, default=JOB_TIMEOUT, help=f"seconds (default {JOB_TIMEOUT:g})")
    run.add_argument("--stop-grace", type=float, default=STOP_GRACE,
                     help=f"after SIGTERM/Ctrl-C is passed on to train, seconds before teardown "
                          f"(default {STOP_GRACE:g})")
    run.add_argument("--keep", action="store_true",
                     help="after train has ended on every host, leave the cluster running (then: exec, down)")
    run.add_argument("train_args", nargs="*", help="after --: arguments for train (default: `train` for "
                     "SageMaker, as `docker run IMAGE train` passes it; none for Batch)")

    up = commands.add_parser("up", help="bring up a cluster and leave it running")
    add_cluster_arguments(up)

    execute = commands.add_parser("exec", help="run a command (default: a shell) on a host of a running cluster")
    execute.add_argument("workdir")
    execute.add_argument("host")
    execute.add_argument("command", nargs="*")

    down = commands.add_parser("down", help="tear down a cluster left running by `up` or `run --keep`")
    down.add_argument("cluster", help="its work directory or its id")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, raise_interrupted)
    signal.signal(signal.SIGINT, raise_interrupted)
    try:
        command = {"run": command_run, "up": command_up, "exec": command_exec, "down": command_down}
        return command[args.subcommand](args)
    except SimClusterError as e:
        print(f"simcluster: error: {e}", file=sys.stderr, flush=True)
        return 2
    except Interrupted as e:
        print(f"simcluster: {e}: stopped (everything brought up was torn down)", file=sys.stderr, flush=True)
        return 128 + e.signum


if __name__ == "__main__":
    sys.exit(main())
