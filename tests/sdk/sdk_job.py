"""One training job through the SageMaker Python SDK's local mode, as a user rehearses one: run with the
SDK's Python (build-sdk/bin/python). Prints the SDK's own output, then one line `RESULT {json}`: whether
fit() raised and with what.

    sdk_job.py --image IMAGE --instance-count N --hyperparameters JSON --output DIR --root DIR [--train DIR]

DOCKER_HOST, the fake AWS credentials and a `docker` on PATH come from the caller (tests/sdk)."""
import argparse
import json
import sys

import sdk_local  # first: telemetry off before the SDK is imported
from sagemaker.estimator import Estimator  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--image", required=True)
parser.add_argument("--instance-count", type=int, required=True)
parser.add_argument("--hyperparameters", required=True)
parser.add_argument("--environment", default="{}")
parser.add_argument("--output", required=True)
parser.add_argument("--root", required=True)
parser.add_argument("--train")
args = parser.parse_args()

session = sdk_local.local_session(args.root)
estimator = Estimator(image_uri=args.image, role="arn:aws:iam::111111111111:role/FakeSageMakerRole",
                      instance_count=args.instance_count, instance_type="local",
                      output_path=f"file://{args.output}", hyperparameters=json.loads(args.hyperparameters),
                      environment=json.loads(args.environment), sagemaker_session=session)
result = {"raised": None}
try:
    estimator.fit({"train": f"file://{args.train}"} if args.train else None, wait=True, logs=True)
except Exception as error:  # noqa: BLE001 - what the user would see is the point
    result["raised"] = f"{type(error).__name__}: {error}"
sdk_local.remove_config()
sys.stdout.flush()
print("RESULT " + json.dumps(result), flush=True)
