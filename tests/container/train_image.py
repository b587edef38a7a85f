"""The image users run, built from docker/Dockerfile with Podman on a Debian base made here (no registry can
be reached: debootstrap, then `podman import`; docs/architecture.md, "Containers on a machine without
Docker"). When this host runs the base's Debian release, the host build's CPU-only train (TRAIN_TEST_PREBUILT)
and the library beside it go in as they are (TRAIN_FROM=prebuilt); otherwise (or with
TRAIN_TEST_IMAGE_COMPILE=1) the image's build stage compiles train. The Debian root file system is cached in
TRAIN_TEST_BASE_CACHE (default /var/cache/train-test-base) with the build's downloaded .debs.

Used by the container test (test_image.py), the SDK's local-mode test (tests/sdk) and shared_image.py, which
builds one image for both (a ctest fixture)."""
import fcntl
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

BASE_RELEASE = "bookworm"  # what make_base_rootfs.sh bootstraps
BASE_CACHE = os.environ.get("TRAIN_TEST_BASE_CACHE", "/var/cache/train-test-base")

def os_release(root="/"):
    values = {}
    with open(os.path.join(root, "etc", "os-release")) as file:
        for line in file:
            key, _, value = line.strip().partition("=")
            values[key] = value.strip('"')
    return values


def prebuilt_unusable(binary):
    """Why the host's train cannot go into the image as it is (None: it can). The base is Debian
    BASE_RELEASE (make_base_rootfs.sh); a binary built on another release may want other libraries."""
    if os.environ.get("TRAIN_TEST_IMAGE_COMPILE") == "1":
        return "TRAIN_TEST_IMAGE_COMPILE=1"
    if not binary:
        return "no TRAIN_TEST_PREBUILT binary given"
    if not os.access(binary, os.X_OK):
        return f"{binary} is not an executable"
    host = os_release()
    if (host.get("ID"), host.get("VERSION_CODENAME")) != ("debian", BASE_RELEASE):
        return f"this host runs {host.get('PRETTY_NAME', 'an unknown release')}, the base Debian {BASE_RELEASE}"
    return None


def make_prebuilt_context(binary, context):
    """A build context with what the Dockerfile reads for TRAIN_FROM=prebuilt: docker/, and prebuilt/ with
    the binary and the packages holding its shared libraries (looked up on this host, the base's release)."""
    shutil.copytree(os.path.join(REPO, "docker"), os.path.join(context, "docker"))
    os.makedirs(os.path.join(context, "prebuilt"))
    shutil.copy2(binary, os.path.join(context, "prebuilt", "train"))
    # The gethostname library the build makes beside train (entrypoint/CMakeLists.txt).
    # The libraries the build makes beside train (entrypoint/CMakeLists.txt): gethostname's, the signal witness.
    for library in ("libtrain_job_host_name.so", "libtrain_signal_witness.so"):
        shutil.copy2(os.path.join(os.path.dirname(binary), library), os.path.join(context, "prebuilt"))
    packages = subprocess.run([os.path.join(REPO, "docker", "runtime_packages.sh"), binary], check=True,
                              text=True, stdout=subprocess.PIPE).stdout
    with open(os.path.join(context, "prebuilt", "runtime-packages"), "w") as file:
        file.write(packages)
    log(f"runtime packages: {' '.join(packages.split())}")
    return context


def build_image(session, work):
    """Builds docker/Dockerfile with Podman on the cached Debian base (as this test's docstring says) and
    returns the image's tag, recorded in `session` (its cleanup removes it). The SDK's local-mode test builds
    the same image (tests/container/CMakeLists.txt: one build for both, shared_image.py)."""
    started = time.monotonic()
    tarball = subprocess.run([os.path.join(HERE, "make_base_rootfs.sh"), BASE_CACHE], check=True,
                             text=True, stdout=subprocess.PIPE).stdout.strip()
    base = session.import_image(tarball, f"localhost/{session.name('base')}:latest")
    log(f"base image {base} ready in {time.monotonic() - started:.0f} s")

    started = time.monotonic()
    build_log = os.path.join(work, "build.log")
    build_args = {"BUILD_BASE": base, "RUNTIME_BASE": base, "BUILD_JOBS": "2"}
    prebuilt = os.environ.get("TRAIN_TEST_PREBUILT", "")
    reason = prebuilt_unusable(prebuilt)
    if reason is None:
        # The host build's train is this release's: the image takes it instead of compiling it again.
        context = make_prebuilt_context(prebuilt, os.path.join(work, "context"))
        build_args["TRAIN_FROM"] = "prebuilt"
        log(f"the image takes the host's {prebuilt} (same Debian release as the base)")
    else:
        context = REPO
        log(f"the image compiles train: {reason}")
    apt_cache = os.path.join(BASE_CACHE, "apt-archives")
    os.makedirs(apt_cache, exist_ok=True)
    # One build at a time on this machine: apt inside refuses a .deb cache whose lock another build
    # holds, and two compiles would only share the same cores.
    with open(os.path.join(BASE_CACHE, "build.lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("another container test is building its image; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        image = session.build_image(
            f"localhost/{session.name('image')}:latest", context,
            os.path.join(context, "docker", "Dockerfile"), build_args,
            # The build's .debs are kept between runs (the base keeps what apt downloads).
            volumes=[f"{apt_cache}:/var/cache/apt/archives"], log_path=build_log)
    log(f"image {image} built in {time.monotonic() - started:.0f} s (log: {build_log})")
    return image


def log(message):
    print(f"[container test] {message}", file=sys.stderr, flush=True)
