"""A job's folder for a test: a scratch /opt/ml, and resourceconfig.json as SageMaker writes it."""
import os
import shutil
import tempfile


def scratch_job_folder(case, prefix):
    """A temporary folder that is removed when CASE (a unittest.TestCase) ends, and the /opt/ml inside it
    (not yet made): (work, base)."""
    work = tempfile.mkdtemp(prefix=prefix)
    case.addCleanup(shutil.rmtree, work, ignore_errors=True)
    return work, os.path.join(work, "opt-ml")


def one_host_resource_config(host):
    """resourceconfig.json of a one-host SageMaker job on HOST, instance groups included."""
    return {"current_host": host, "hosts": [host], "current_group_name": "homogeneousCluster",
            "current_instance_type": "ml.c5.xlarge", "network_interface_name": "eth0",
            "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": "ml.c5.xlarge",
                                 "hosts": [host]}]}
