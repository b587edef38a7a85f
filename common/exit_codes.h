// The exit codes `train` itself uses (docs/faults.md lists them). A failing rank's own code, or
// 128+N when a signal N killed it, passes through unchanged.
#pragma once

namespace train::exit_code {

constexpr int success = 0;
constexpr int usage = 64;             // bad command line
constexpr int invalid_job = 65;       // the job description (config files, hyperparameters, env) is wrong
constexpr int launch_failed = 69;     // mpirun (or the user's command) could not be started
constexpr int internal_error = 70;    // a bug in train: please report it
constexpr int environment = 74;       // the machine, not the job: a disk that is full, read-only or not ours
constexpr int host_lost = 75;         // a worker lost the master host of a multi-host job
constexpr int timed_out = 124;        // a bounded wait ran out
constexpr int signal_base = 128;      // 128+N: stopped by signal N (143 = SIGTERM)

}  // namespace train::exit_code
