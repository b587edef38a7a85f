"""What every job script here (sdk_job.py, sdk_script_job.py) does before it builds an estimator: telemetry
turned off (the SDK's opt-out, in a user config of our own, so nothing outside this machine is reached) before
the SDK is imported, and a LocalSession whose code is mounted, not uploaded. Imported first, from the SDK's
Python (build-sdk/bin/python)."""
import os
import tempfile

with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as _config:
    _config.write("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
os.environ["SAGEMAKER_USER_CONFIG_OVERRIDE"] = _config.name

from sagemaker.local import LocalSession  # noqa: E402


def local_session(root):
    """local_code: no S3 for the code; container_root: where the SDK writes each host's /opt/ml and its
    compose file."""
    session = LocalSession()
    session.config = {"local": {"local_code": True, "container_root": root}}
    return session


def remove_config():
    os.unlink(_config.name)
