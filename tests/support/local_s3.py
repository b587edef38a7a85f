"""A local S3 that checks access as AWS does, for tests: moto's server mode (moto 5.2.5 from PyPI, which
scripts/setup.sh installs into build-moto/) on 127.0.0.1 at a free port, with IAM's authentication and policies
switched on (moto's INITIAL_NO_AUTH_ACTION_COUNT: the first requests make an administrator, every later one
must be signed by a key moto issued and be allowed by its principal's policies). Also a container credentials
endpoint (what SageMaker and ECS give a container through AWS_CONTAINER_CREDENTIALS_*_URI) serving a role's
temporary credentials, on 127.0.0.1 too.

    with LocalS3(moto_python) as s3:
        s3.admin.create_bucket(Bucket="code")
        key_id, secret = s3.user_with_policy("reader", [{"Effect": "Allow", "Action": "s3:GetObject", ...}])

Setup calls go through Debian's boto3 (python3-boto3), the same client train's fetcher uses.
"""
import http.server
import json
import os
import socket
import subprocess
import threading
import time

import boto3

START_LIMIT = 60  # seconds for moto's server to answer
ADMIN_POLICY = [{"Effect": "Allow", "Action": "*", "Resource": "*"}]
REGION = "us-east-1"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def policy_document(statements):
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


class LocalS3:
    def __init__(self, moto_python, log_path=None):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        server = os.path.join(os.path.dirname(moto_python), "moto_server")
        # Three unauthenticated actions make the administrator (create_user, put_user_policy, create_access_key).
        environment = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3", MOTO_ALLOW_NONEXISTENT_REGION="true")
        self._log = open(log_path or os.devnull, "w")
        self._server = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(self.port)], env=environment,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_until_listening()
            anonymous = self._client("iam", "anonymous", "anonymous")
            anonymous.create_user(UserName="admin")
            anonymous.put_user_policy(UserName="admin", PolicyName="admin", PolicyDocument=policy_document(ADMIN_POLICY))
            key = anonymous.create_access_key(UserName="admin")["AccessKey"]
            self.admin_key = (key["AccessKeyId"], key["SecretAccessKey"])
            self.admin = self._client("s3", *self.admin_key)
            self.iam = self._client("iam", *self.admin_key)
            self.sts = self._client("sts", *self.admin_key)
        except BaseException:
            self.close()
            raise

    def _wait_until_listening(self):
        deadline = time.monotonic() + START_LIMIT
        while time.monotonic() < deadline:
            if self._server.poll() is not None:
                raise RuntimeError(f"moto_server exited with code {self._server.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"moto_server did not listen on port {self.port} within {START_LIMIT} s")

    def _client(self, service, key_id, secret, token=None):
        return boto3.session.Session().client(service, endpoint_url=self.endpoint, region_name=REGION,
                                              aws_access_key_id=key_id, aws_secret_access_key=secret,
                                              aws_session_token=token)

    def user_with_policy(self, name, statements):
        """A user allowed what `statements` allow: its (access key id, secret)."""
        self.iam.create_user(UserName=name)
        self.iam.put_user_policy(UserName=name, PolicyName=name, PolicyDocument=policy_document(statements))
        key = self.iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    def role_credentials(self, name, statements):
        """A role's temporary credentials (STS AssumeRole), as a container credentials endpoint serves them."""
        trust = policy_document([{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}])
        role = self.iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust)["Role"]
        self.iam.put_role_policy(RoleName=name, PolicyName=name, PolicyDocument=policy_document(statements))
        credentials = self.sts.assume_role(RoleArn=role["Arn"], RoleSessionName="train-test")["Credentials"]
        return {"AccessKeyId": credentials["AccessKeyId"], "SecretAccessKey": credentials["SecretAccessKey"],
                "Token": credentials["SessionToken"], "Expiration": credentials["Expiration"].isoformat()}

    def close(self):
        if self._server.poll() is None:
            self._server.terminate()
            try:
                self._server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ContainerCredentials:
    """An HTTP endpoint on 127.0.0.1 that answers GET PATH with `credentials` as JSON, as the container
    credentials endpoint does; `requests` counts the requests it answered."""

    def __init__(self, credentials, path="/v2/credentials/train-test"):
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                outer.requests += 1
                body = json.dumps(credentials).encode() if self.path == path else b"{}"
                self.send_response(200 if self.path == path else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self._server.server_address[1]}{path}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
