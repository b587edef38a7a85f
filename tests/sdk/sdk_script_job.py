"""One script-mode training job through the SageMaker Python SDK's local mode, as a user sends their own
program: run with the SDK's Python (build-sdk/bin/python). Prints the SDK's own output, then one line
`RESULT {json}`: whether fit() raised and with what.

    sdk_script_job.py --image IMAGE --estimator pytorch|generic --entry-point FILE --source-dir DIR
                      --instance-count N [--distribution JSON] [--hyperparameters JSON] --output DIR --root DIR

DOCKER_HOST, the fake AWS credentials and a `docker` on PATH come from the caller (tests/sdk)."""
import argparse
import json
import sys

import sdk_local  # first: telemetry off before the SDK is imported
from sagemaker.estimator import Estimator  # noqa: E402
from sagemaker.pytorch import PyTorch  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--image", required=True)
parser.add_argument("--estimator", choices=["pytorch", "generic"], required=True)
parser.add_argument("--entry-point", required=True)
parser.add_argument("--source-dir", required=True)
parser.add_argument("--instance-count", type=int, required=True)
parser.add_argument("--distribution", default="null")
parser.add_argument("--hyperparameters", default="{}")
parser.add_argument("--environment", default="{}")
parser.add_argument("--output", required=True)
parser.add_argument("--root", required=True)
args = parser.parse_args()

session = sdk_local.local_session(args.root)  # the source folder is mounted as /opt/ml/code
common = dict(entry_point=args.entry_point, source_dir=args.source_dir, image_uri=args.image,
              role="arn:aws:iam::111111111111:role/FakeSageMakerRole", instance_count=args.instance_count,
              instance_type="local", output_path=f"file://{args.output}",
              hyperparameters=json.loads(args.hyperparameters), environment=json.loads(args.environment),
              sagemaker_session=session)
if args.estimator == "pytorch":
    # With image_uri given, the SDK still asks for a framework and Python version (it checks the distribution
    # against them): those of Debian's python3-torch era that it accepts.
    estimator = PyTorch(framework_version="2.0", py_version="py310", distribution=json.loads(args.distribution),
                        **common)
else:
    estimator = Estimator(**common)
result = {"raised": None}
try:
    estimator.fit(wait=True, logs=True)
except Exception as error:  # noqa: BLE001 - what the user would see is the point
    result["raised"] = f"{type(error).__name__}: {error}"
sdk_local.remove_config()
sys.stdout.flush()
print("RESULT " + json.dumps(result), flush=True)
