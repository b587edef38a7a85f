// Script mode's launch (job/script_mode.h says when): the runner's ranks per host, the program's code fetched
// and installed on this host before any rank starts (user_code/user_code.h), and the program's command line as
// the toolkit's ProcessRunner makes it, run in the code folder. The ranks then run it as they run `train --
// CMD`: the same SM_* variables and arguments, torchrun's environment, bounded waits and failure reports.
#pragma once

#include "common/environment_map.h"
#include "entrypoint/user_code/user_code.h"
#include "job/job_description.h"
#include "job/script_mode.h"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace train {

// The toolkit's command line for the program (its arguments come after, from rank-exec): a Python program
// `PYTHON -- PROGRAM`, a package `PYTHON -m MODULE` (PROGRAM without a trailing ".py"), anything else
// `./PROGRAM` (the toolkit runs `/bin/sh -c "./PROGRAM ARGS"` with the same words).
std::vector<std::string> script_command(user_code::ProgramKind kind, const std::string& program,
                                        const std::string& python);

// What was chosen, one sentence each, for the log and `train validate`: the program and who named it, how it
// runs (`kind` once the code is known), the runner and why, the ranks on which hosts, and train's own
// training settings that the job sets but that only reach the program.
std::vector<std::string> describe_script_mode(const JobDescription& job, const ScriptMode& script,
                                              const RunnerChoice& runner,
                                              const std::optional<user_code::ProgramKind>& kind);

struct ScriptLaunch {
  std::filesystem::path folder;      // the code folder: the launcher runs mpirun there, and so the ranks
  std::vector<std::string> command;  // the program's command line, without the hyperparameters' arguments
  std::vector<std::string> done;     // what the code's preparation did
};

// Fetches and installs the code on this host (a stop signal during it ends it: UserCodeError 128+N).
// Throws UserCodeError (its report and exit code) or ConfigError (a bad TRAIN_CODE_* setting).
ScriptLaunch prepare_script_launch(const JobDescription& job, const ScriptMode& script,
                                   const EnvironmentMap& environment);

}  // namespace train
