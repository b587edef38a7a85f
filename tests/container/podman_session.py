"""Podman as this machine runs it (docs/architecture.md, "Containers on a machine without Docker"), and a record of everything a test makes with it.

Two adjustments make Debian's Podman work here: the runc runtime (not crun) and container ulimits no
higher than the host's hard limits. They go into a private containers.conf (CONTAINERS_CONF), so the
machine's own configuration is left alone. Every container, image and network is created through a
PodmanSession under a name unique to the run, recorded, and removed by cleanup() whatever happened.
"""
import os
import resource
import shutil
import subprocess
import tempfile
import uuid


class PodmanError(RuntimeError):
    pass


def require_tools(*tools):
    """A missing tool is a failure, not a skip: the container test is part of the suite."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise PodmanError(f"the container test needs {', '.join(missing)}; scripts/setup.sh installs "
                          f"them (apt-get install {' '.join(missing)})")


def _containers_conf(directory):
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    # Open MPI and sshd need no more than this; a limit above the host's hard limit makes runc fail.
    nofile = 65536 if nofile == resource.RLIM_INFINITY else min(nofile, 65536)
    nproc = 32768 if nproc == resource.RLIM_INFINITY else min(nproc, 32768)
    path = os.path.join(directory, "containers.conf")
    with open(path, "w") as conf:
        conf.write("[containers]\n"
                   f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
                   "[engine]\n"
                   'runtime = "runc"\n'
                   # Debian's containers-common ships a CNI config without the CNI plugins: use netavark.
                   "[network]\n"
                   'network_backend = "netavark"\n')
    return path


class PodmanSession:
    def __init__(self, prefix="train-test"):
        require_tools("podman")
        self.run_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self._conf_dir = tempfile.mkdtemp(prefix=f"{self.run_id}-conf-")
        self.env = dict(os.environ, CONTAINERS_CONF=_containers_conf(self._conf_dir))
        self.containers, self.images, self.networks = [], [], []

    def name(self, what):
        return f"{self.run_id}-{what}"

    def podman(self, *args, check=True, timeout=None, capture=True):
        result = subprocess.run(["podman", *args], env=self.env, text=True, timeout=timeout,
                                stdout=subprocess.PIPE if capture else None,
                                stderr=subprocess.STDOUT if capture else None)
        if check and result.returncode != 0:
            raise PodmanError(f"podman {' '.join(args)} exited with {result.returncode}:\n{result.stdout}")
        return result

    # --- things that are made, each recorded before it exists so that a half-made one is removed too ---
    def import_image(self, tarball, tag):
        self.images.append(tag)
        self.podman("import", "--change", "CMD /bin/bash", tarball, tag)
        return tag

    def build_image(self, tag, context, dockerfile, build_args, volumes=(), log_path=None):
        self.images.append(tag)
        # --layers=false keeps no image of the build stage or of intermediate steps, --force-rm no build
        # container even when the build fails: the tagged image is all this leaves behind.
        args = ["build", "--network", "host", "--layers=false", "--force-rm", "-f", dockerfile, "-t", tag]
        for key, value in build_args.items():
            args += ["--build-arg", f"{key}={value}"]
        for volume in volumes:
            args += ["-v", volume]
        with open(log_path or os.devnull, "w") as log:
            result = subprocess.run(["podman", *args, context], env=self.env, text=True, stdout=log,
                                    stderr=subprocess.STDOUT)
        if result.returncode != 0:
            tail = ""
            if log_path:
                with open(log_path, errors="replace") as log:
                    tail = "".join(log.readlines()[-40:])
            raise PodmanError(f"podman build exited with {result.returncode}; the end of its log:\n{tail}")
        return tag

    def create_network(self, name):
        self.networks.append(name)
        # Internal: the job's containers reach each other, nothing else, and no NAT rules are needed.
        self.podman("network", "create", "--internal", name)
        return name

    def run_container(self, name, args, image, command=(), detach=False, timeout=None):
        self.containers.append(name)
        return self.podman("run", *(["-d"] if detach else []), "--name", name, *args, image, *command,
                           check=False, timeout=timeout)

    def cleanup(self):
        """Removes everything recorded, newest first, and says what could not be removed."""
        problems = []
        for name in reversed(self.containers):
            self._remove(["rm", "--force", "--time", "0", "--ignore", name], problems)
        for name in reversed(self.networks):
            self._remove(["network", "rm", "--force", name], problems, missing_ok=True)
        for tag in reversed(self.images):
            self._remove(["rmi", "--force", tag], problems, missing_ok=True)
        self.containers, self.networks, self.images = [], [], []
        shutil.rmtree(self._conf_dir, ignore_errors=True)
        return problems

    def _remove(self, args, problems, missing_ok=False):
        result = self.podman(*args, check=False)
        if result.returncode != 0 and not (missing_ok and "not found" in (result.stdout or "").lower()):
            problems.append(f"podman {' '.join(args)}: {result.stdout.strip()}")
