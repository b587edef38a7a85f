"""One training job through the SageMaker Python SDK's local mode, as a user rehearses one: run with the
SDK's Python (build-sdk/bin/python). Prints the SDK's own output, then one line `RESULT {json}`: whether
fit() raised and with what.

    sdk_job.py --image IMAGE --instance-count N --hyperparameters JSON --output DIR --root DIR [--train DIR]

DOCKER_HOST, the fake AWS credentials and a `docker` on PATH come from the caller (tests/sdk)."""
import argparse
import json
import os
import sys
import tempfile

# No telemetry: nothing outside this machine is reached (the SDK's opt-out, in a user config of our own).
with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as config:
    config.write("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
os.environ["SAGEMAKER_USER_CONFIG_OVERRIDE"] = config.name

from sagemaker.estimator import Estimator  # noqa: E402
from sagemaker.local import LocalSession  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--image", required=True)
parser.add_argument("--instance-count", type=int, required=True)
parser.add_argument("--hyperparameters", required=True)
parser.add_argument("--environment", default="{}")
parser.add_argument("--output", required=True)
parser.add_argument("--root", required=True)
parser.add_argument("--train")
args = parser.parse_args()

session = LocalSession()
# local_code: no S3 for the code; container_root: where the SDK writes each host's /opt/ml and its compose file.
session.config = {"local": {"local_code": True, "container_root": args.root}}
estimator = Estimator(image_uri=args.image, role="arn:aws:iam::111111111111:role/FakeSageMakerRole",
                      instance_count=args.instance_count, instance_type="local",
                      output_path=f"file://{args.output}", hyperparameters=json.loads(args.hyperparameters),
                      environment=json.loads(args.environment), sagemaker_session=session)
result = {"raised": None}
try:
    estimator.fit({"train": f"file://{args.train}"} if args.train else None, wait=True, logs=True)
except Exception as error:  # noqa: BLE001 - what the user would see is the point
    result["raised"] = f"{type(error).__name__}: {error}"
os.unlink(config.name)
sys.stdout.flush()
print("RESULT " + json.dumps(result), flush=True)
