"""What the real SageMaker training toolkit (sagemaker-training 5.1.4, in build-toolkit/) does with a job's code
in SAGEMAKER_BASE_DIR: run with build-toolkit/bin/python; prints one JSON object.

  fetch URI        files.download_and_extract(URI, environment.code_dir), as entry_point.run does first (S3
                   through the toolkit's own boto3, at S3_ENDPOINT_URL): {"ok": true} or {"ok": false, "error"}
  install PROGRAM  entry_point.install(PROGRAM, environment.code_dir), with process.check_error recorded instead
                   of run: {"kind": its _entry_point_type, "commands": [{"cmd": [...], "cwd": ...}, ...]}
  validate NAMES   process.validate_entry_point for each name of the JSON list NAMES: {"NAME": true|false, ...}
"""
import json
import sys

from sagemaker_training import _entry_point_type, entry_point, environment, files, process  # noqa: E402

mode, argument = sys.argv[1], sys.argv[2]
if mode == "fetch":
    try:
        files.download_and_extract(argument, environment.code_dir)
        result = {"ok": True}
    except Exception as error:  # noqa: BLE001 (the oracle reports whatever it raised)
        result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
elif mode == "validate":
    result = {}
    for name in json.loads(argument):
        try:
            process.validate_entry_point(name)
            result[name] = True
        except Exception:  # noqa: BLE001 (ClientError: refused)
            result[name] = False
else:
    recorded = []

    def record(cmd, error_classes, processes_per_host, cwd=None, capture_error=True, **kwargs):
        recorded.append({"cmd": cmd, "cwd": cwd})

    process.check_error = record  # modules.install and install_requirements call it through the module
    entry_point.install(argument, environment.code_dir)
    result = {"kind": _entry_point_type.get(environment.code_dir, argument).name, "commands": recorded}
json.dump(result, sys.stdout)
