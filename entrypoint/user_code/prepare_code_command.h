// `train prepare-code SUBMIT_DIRECTORY PROGRAM` (not in the usage text): prepare_user_code alone, as the launcher
// runs it before the ranks start, for tests and for trying a job's code. The job's folder is /opt/ml or
// SAGEMAKER_BASE_DIR, the settings come from the environment, a stop signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT)
// ends it; a failure is reported as the job's would be (output/failure, the exit code). On success stdout
// gets one JSON object: {"folder": ..., "kind": "python_package"|"python_program"|"command", "done": [...]}.
#pragma once

#include <string>
#include <vector>

namespace train::user_code {

int run_prepare_code(const std::vector<std::string>& arguments);

}  // namespace train::user_code
