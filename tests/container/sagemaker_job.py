"""Writes an /opt/ml-like directory holding one SageMaker job, as SageMaker lays it out in a container."""
import json
import os


def write_job(root, current_host, hosts, hyperparameters):
    """root becomes the container's /opt/ml: input/config/*.json and empty model/ and output/."""
    config = os.path.join(root, "input", "config")
    os.makedirs(config, exist_ok=True)
    for folder in ("model", "output", "checkpoints"):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    resource = {"current_host": current_host, "hosts": sorted(hosts), "network_interface_name": "eth0",
                "current_instance_type": "local", "current_group_name": "homogeneousCluster"}
    _write_json(os.path.join(config, "resourceconfig.json"), resource)
    # SageMaker hands every hyperparameter over as a string.
    _write_json(os.path.join(config, "hyperparameters.json"), {k: str(v) for k, v in hyperparameters.items()})
    _write_json(os.path.join(config, "inputdataconfig.json"), {})
    return root


def _write_json(path, value):
    with open(path, "w") as file:
        json.dump(value, file, indent=2)
