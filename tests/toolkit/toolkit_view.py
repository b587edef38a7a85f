"""What the real SageMaker training toolkit (sagemaker-training 5.1.4, in build-toolkit/) gives a user's
program for the job in SAGEMAKER_BASE_DIR: run with build-toolkit/bin/python; prints one JSON object.

  env_vars     Environment().to_env_vars(): every SM_* variable
  cmd_args     Environment().to_cmd_args(): the arguments its runner appends to the program
  os_environ   what Environment() sets in its own process (CURRENT_HOST, SAGEMAKER_JOB_NAME, SAGEMAKER_REGION),
               which the program inherits
  mpi          its MPI runner for this host (sagemaker_mpi_enabled jobs use it): master or worker, its hosts,
               processes per host, -np, and the library it preloads into the ranks (LD_PRELOAD)
  cpu_count    multiprocessing.cpu_count(), what SM_NUM_CPUS counts
"""
import json
import multiprocessing
import os
import sys

from sagemaker_training import environment, mpi, runner  # noqa: E402  (reads SAGEMAKER_BASE_DIR on import)

env = environment.Environment()
view = {
    "env_vars": env.to_env_vars(),
    "cmd_args": env.to_cmd_args(),
    "os_environ": {name: os.environ.get(name) for name in ("CURRENT_HOST", "SAGEMAKER_JOB_NAME", "SAGEMAKER_REGION")},
    "cpu_count": multiprocessing.cpu_count(),
}
process_runner = runner.get(runner.MPIRunnerType, user_entry_point="program.py")
view["mpi"] = {
    "master": isinstance(process_runner, mpi.MasterRunner),
    "master_hostname": str(getattr(process_runner, "_master_hostname", "")),
    "hosts": list(getattr(process_runner, "_hosts", [])),
    "processes_per_host": process_runner._processes_per_host,
    "num_processes": getattr(process_runner, "_num_processes", None),
    "preload": mpi.getfile(mpi.gethostname),
}
json.dump(view, sys.stdout)
