"""Fetches the user's code for `train` (entrypoint/user_code/): an S3 object or a local file, unpacked as a tar
archive into a fresh folder, refusing any member that would land outside it.

    python3 fetch_code.py SOURCE ARCHIVE_FILE INTO

SOURCE is s3://BUCKET/KEY or a local file; an S3 object is downloaded to ARCHIVE_FILE (which must not exist)
first. INTO is an empty folder. `train` embeds this file and runs it as `python3 -I -c SOURCE_TEXT ...`
under Debian's python3, where python3-boto3 is.

Progress goes to stderr, line by line (train relays it into the job's log). The last line of stdout is one
JSON object: {"ok": true, "files": N, "bytes": N, "downloaded": N, "credentials": "..."} or {"ok": false,
"kind": KIND, "message": "..."}, with KIND one of: no_client, bad_uri, no_credentials, credentials_refused,
not_found, access_denied, s3_refused (another 4xx), s3_error (5xx, throttling), unreachable, not_archive,
damaged_archive, hostile_member, disk.
Exit status 0 with ok, 1 without; anything else is a failure of this helper itself.

S3 goes through boto3 (botocore), which finds credentials where SageMaker provides them: the container
credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI), the instance role (IMDS), the
environment (AWS_ACCESS_KEY_ID ...) and ~/.aws. The endpoint is AWS_ENDPOINT_URL_S3, else S3_ENDPOINT_URL (the
toolkit's), else AWS_ENDPOINT_URL: Debian 12's botocore (1.29) predates its own reading of AWS_ENDPOINT_URL*,
so they are read here. The region is AWS_REGION, else SAGEMAKER_REGION, as the toolkit's s3_download, else
botocore's own (AWS_DEFAULT_REGION, ~/.aws/config).
"""
import errno
import json
import os
import posixpath
import stat
import sys
import tarfile
import time
import zlib


class Refusal(Exception):
    """A failure with its kind, for train's report."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def log(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


# --- S3 -----------------------------------------------------------------------------------------------------
def split_s3_uri(uri):
    rest = uri[len("s3://"):]
    bucket, _, key = rest.partition("/")
    if not bucket or not key:
        raise Refusal("bad_uri", "%s: expected s3://BUCKET/KEY such as s3://my-bucket/job/source/sourcedir.tar.gz"
                      % uri)
    return bucket, key


def s3_endpoint():
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None, None
    for name in ("AWS_ENDPOINT_URL_S3", "S3_ENDPOINT_URL", "AWS_ENDPOINT_URL"):
        if os.environ.get(name):
            return os.environ[name], name
    return None, None


CREDENTIAL_SOURCES = {
    "env": "the environment (AWS_ACCESS_KEY_ID)",
    "container-role": "the container credentials endpoint",
    "iam-role": "the instance role (instance metadata service)",
    "shared-credentials-file": "the shared credentials file",
    "config-file": "the AWS config file",
    "assume-role": "an assumed role (AWS config file)",
}

NO_CREDENTIALS_HELP = (
    "SageMaker provides them to every training container through the container credentials endpoint "
    "(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, from the job's role); elsewhere give the container "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), run it on an instance with a role, or "
    "put the code in a local folder or .tar.gz and name that in sagemaker_submit_directory")


def download(uri, destination):
    bucket, key = split_s3_uri(uri)
    try:
        import boto3
        import botocore.config
        import botocore.exceptions as failures
    except ImportError as error:
        raise Refusal("no_client", "%s cannot import boto3 (%s): install python3-boto3 (Debian, Ubuntu) in the image"
                      % (sys.executable, error))
    endpoint, endpoint_variable = s3_endpoint()
    region = os.environ.get("AWS_REGION") or os.environ.get("SAGEMAKER_REGION") or None
    session = boto3.session.Session(region_name=region)
    try:
        credentials = session.get_credentials()
    except (failures.CredentialRetrievalError, failures.PartialCredentialsError, failures.ConnectionError) as error:
        raise Refusal("no_credentials", "no AWS credentials for %s: %s. %s" % (uri, error, NO_CREDENTIALS_HELP))
    if credentials is None:
        raise Refusal("no_credentials", "no AWS credentials found for %s. %s" % (uri, NO_CREDENTIALS_HELP))
    source = CREDENTIAL_SOURCES.get(credentials.method, credentials.method)
    config = botocore.config.Config(connect_timeout=10, read_timeout=60,
                                    retries={"max_attempts": 5, "mode": "standard"})
    client = session.client("s3", endpoint_url=endpoint, config=config)
    where = "%s (%s)" % (endpoint, endpoint_variable) if endpoint else client.meta.endpoint_url
    log("downloading %s from %s, region %s, credentials from %s"
        % (uri, where, client.meta.region_name or "unset", source))
    started = time.monotonic()
    size = 0
    try:
        response = client.get_object(Bucket=bucket, Key=key)
        with open(destination, "xb") as out:
            for chunk in response["Body"].iter_chunks(1 << 20):
                out.write(chunk)
                size += len(chunk)
    except failures.ClientError as error:
        raise s3_refusal(uri, bucket, key, error, source)
    except (failures.NoCredentialsError, failures.PartialCredentialsError,
            failures.CredentialRetrievalError) as error:
        raise Refusal("no_credentials", "no AWS credentials for %s: %s. %s" % (uri, error, NO_CREDENTIALS_HELP))
    except (failures.EndpointConnectionError, failures.ConnectTimeoutError, failures.ReadTimeoutError,
            failures.ConnectionClosedError, failures.ConnectionError) as error:
        raise Refusal("unreachable", "cannot reach S3 at %s for %s: %s. Check the job's network (a VPC without a "
                      "route or endpoint to S3?)" % (where, uri, error))
    except OSError as error:
        raise Refusal("disk", "cannot write %s: %s" % (destination, error))
    log("downloaded %s: %d bytes in %.1f s" % (uri, size, time.monotonic() - started))
    return size, source


def s3_refusal(uri, bucket, key, error, source):
    code = str(error.response.get("Error", {}).get("Code", ""))
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    said = error.response.get("Error", {}).get("Message", "") or str(error)
    if code == "NoSuchBucket":
        return Refusal("not_found", "%s: the bucket %s does not exist (S3 said %s: %s)" % (uri, bucket, code, said))
    if code in ("NoSuchKey", "404", "NotFound"):
        return Refusal("not_found", "%s: no object %s in the bucket %s (S3 said %s: %s)" % (uri, key, bucket, code,
                                                                                           said))
    if code in ("AccessDenied", "403", "AllAccessDisabled", "AccountProblem"):
        return Refusal("access_denied",
                       "%s: access denied (S3 said %s: %s) to the credentials from %s: the job's role needs "
                       "s3:GetObject on arn:aws:s3:::%s/%s (and KMS decrypt for an encrypted object); S3 also says "
                       "this for a missing object when the role may not list the bucket"
                       % (uri, code, said, source, bucket, key))
    if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
                "TokenRefreshRequired"):
        return Refusal("credentials_refused", "%s: S3 refused the credentials from %s (%s: %s)"
                       % (uri, source, code, said))
    if status is None or status >= 500 or code in ("SlowDown", "Throttling", "RequestTimeout"):
        return Refusal("s3_error", "%s: S3 failed (%s %s: %s); it may answer if the job is run again"
                       % (uri, status, code, said))
    return Refusal("s3_refused", "%s: S3 refused it (%s %s: %s)" % (uri, status, code, said))


# --- unpacking ----------------------------------------------------------------------------------------------
def hostile(member, reason):
    return Refusal("hostile_member", "archive member %r %s; nothing was unpacked" % (member.name, reason))


def member_path(member):
    """The member's path relative to the folder, or a refusal: no absolute names, no '..'."""
    name = member.name
    if name.startswith("/"):
        raise hostile(member, "has an absolute name")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise hostile(member, "climbs out of the code folder through '..'")
    return "/".join(parts)


def hard_link_target(member):
    """The path of the file a hard link member names, or a refusal naming the link."""
    if member.linkname.startswith("/"):
        raise hostile(member, "is a hard link to an absolute name (%s)" % member.linkname)
    parts = [part for part in member.linkname.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise hostile(member, "is a hard link that climbs out of the code folder through '..' (to %s)"
                      % member.linkname)
    return "/".join(parts)


def check_members(members):
    """Every member judged before anything is written: (path, member) in archive order."""
    checked = []
    kinds = {}  # path -> "dir", "file" or "link" as the archive leaves it
    for member in members:
        path = member_path(member)
        if member.ischr() or member.isblk() or member.isfifo():
            raise hostile(member, "is a device or FIFO, which has no place in a code folder")
        if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
            raise hostile(member, "is of tar type %r, which train does not unpack" % member.type)
        if not path:
            if member.isdir():
                continue  # "./" itself
            raise hostile(member, "names the code folder itself")
        if member.issym():
            target = member.linkname
            if target.startswith("/"):
                raise hostile(member, "is a symbolic link to an absolute path (%s)" % target)
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
            if resolved == ".." or resolved.startswith("../"):
                raise hostile(member, "is a symbolic link that leads out of the code folder (to %s)" % target)
        if member.islnk():
            target = hard_link_target(member)
            if kinds.get(target) != "file":
                raise hostile(member, "is a hard link to %r, which is no regular file earlier in the archive"
                              % member.linkname)
        # A member below one the archive makes a symbolic link would be written through that link.
        parent = posixpath.dirname(path)
        while parent:
            if kinds.get(parent) == "link":
                raise hostile(member, "lies inside %r, which the archive makes a symbolic link" % parent)
            parent = posixpath.dirname(parent)
        kinds[path] = "dir" if member.isdir() else "link" if member.issym() else "file"
        checked.append((path, member))
    return checked, kinds


def unpack(archive, into):
    """Unpacks `archive` into the empty folder `into`: files, folders and hard links first, symbolic links
    last, so that nothing is ever written through a link; then every link is resolved on disk and must stay
    inside. Modes keep their permission bits less set-id, sticky and group/other write; owners are ours."""
    try:
        tar = tarfile.open(archive, mode="r:*")
    except (tarfile.CompressionError, EOFError, zlib.error) as error:
        raise Refusal("damaged_archive", "%s is damaged: %s" % (archive, error))
    except OSError as error:
        raise Refusal("not_found", "cannot read %s: %s" % (archive, error))
    except tarfile.ReadError:
        with open(archive, "rb") as file:
            start = file.read(16)
        raise Refusal("not_archive", "%s is not a tar archive (neither gzip'ed, bzip2'ed, xz'ed nor plain; it starts "
                      "with %r): sagemaker_submit_directory must name a .tar.gz such as the SDK's sourcedir.tar.gz, "
                      "or a folder" % (archive, start))
    files = 0
    size = 0
    with tar:
        try:
            members = tar.getmembers()
        except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
            raise Refusal("damaged_archive", "%s is damaged: %s" % (archive, error))
        checked, kinds = check_members(members)
        root = os.path.realpath(into)
        links = []
        directories = []
        for path, member in checked:
            target = os.path.join(root, path)
            try:
                os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
                if member.isdir():
                    os.makedirs(target, mode=0o755, exist_ok=True)
                    directories.append((target, member))
                elif member.issym():
                    links.append((path, target, member))
                elif member.islnk():
                    replace(target)
                    os.link(os.path.join(root, hard_link_target(member)), target, follow_symlinks=False)
                    files += 1
                else:
                    replace(target)
                    size += write_member(tar, member, target)
                    files += 1
            except (tarfile.TarError, EOFError, zlib.error) as error:
                raise Refusal("damaged_archive", "%s is damaged at member %r: %s" % (archive, member.name, error))
            except OSError as error:
                raise unpack_refusal(member, into, error)
        # The last member of a name wins, as tar has it: a link replaced by a later file or folder is not made.
        links = [(path, target, member) for path, target, member in links if kinds[path] == "link"]
        for path, target, member in links:
            try:
                replace(target)
                os.symlink(member.linkname, target)
            except OSError as error:
                raise unpack_refusal(member, into, error)
        for target, member in reversed(directories):
            os.chmod(target, safe_mode(member.mode) | 0o700)
            os.utime(target, (member.mtime, member.mtime))
        for path, target, member in links:
            resolved = os.path.realpath(target)
            if resolved != root and not resolved.startswith(root + os.sep):
                raise hostile(member, "is a symbolic link that leads out of the code folder once unpacked (to %s)"
                              % member.linkname)
    return files, size


def unpack_refusal(member, into, error):
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
        return Refusal("disk", "cannot unpack member %r into %s: %s" % (member.name, into, error))
    return Refusal("damaged_archive", "archive member %r cannot be unpacked where the archive puts it (%s); nothing "
                   "was unpacked" % (member.name, error))


def replace(target):
    """A later member of the same name wins, as tar has it; a folder in its place is an error (EISDIR)."""
    if os.path.islink(target) or (os.path.lexists(target) and not os.path.isdir(target)):
        os.unlink(target)


def safe_mode(mode):
    return mode & 0o755


def write_member(tar, member, target):
    source = tar.extractfile(member)
    written = 0
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "wb") as out, source:
        while True:
            chunk = source.read(1 << 20)
            if not chunk:
                break
            out.write(chunk)
            written += len(chunk)
        os.fchmod(out.fileno(), safe_mode(member.mode) | 0o400)
    os.utime(target, (member.mtime, member.mtime))
    return written


def main(argv):
    if len(argv) != 3:
        log("usage: fetch_code.py SOURCE ARCHIVE_FILE INTO")
        return 2
    source, archive_file, into = argv
    result = {"ok": True, "downloaded": 0, "credentials": ""}
    try:
        if source.startswith("s3://"):
            result["downloaded"], result["credentials"] = download(source, archive_file)
            archive = archive_file
        else:
            archive = source
        log("unpacking %s" % (source if archive == source else os.path.basename(source)))
        result["files"], result["bytes"] = unpack(archive, into)
    except Refusal as refusal:
        # One line: it becomes the first line of the job's failure file.
        message = "; ".join(line.strip() for line in str(refusal).splitlines() if line.strip())
        result = {"ok": False, "kind": refusal.kind, "message": message}
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
