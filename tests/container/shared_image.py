"""One build of the image for the tests that run it (ctest fixture `train_image`, tests/container/CMakeLists.txt):

    shared_image.py build TAG    builds docker/Dockerfile as train_image.build_image does and tags it TAG
    shared_image.py remove TAG   removes it

The container test and the SDK's local-mode test get TAG as TRAIN_TEST_IMAGE, so the image is built once for
both; `remove` runs after them, pass or fail."""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from podman_session import PodmanSession, require_tools  # noqa: E402
from train_image import build_image, log  # noqa: E402


def main(action, tag):
    require_tools("podman", "debootstrap")
    session = PodmanSession()
    work = tempfile.mkdtemp(prefix="train-shared-image-")
    try:
        if action == "build":
            built = build_image(session, work)
            session.podman("tag", built, tag)
            log(f"image {tag} ready for the tests that run it")
        else:
            session.podman("rmi", "--force", tag, check=False)
    finally:
        problems = session.cleanup()  # the build's own tag and base image; `tag` stays until `remove`
        shutil.rmtree(work, ignore_errors=True)
    if problems:
        raise SystemExit("could not remove what the build made:\n" + "\n".join(problems))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "remove"):
        raise SystemExit("usage: shared_image.py build|remove TAG")
    main(sys.argv[1], sys.argv[2])
