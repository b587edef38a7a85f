// Every TRAIN_* setting train reads from its environment (docs/environment.md): what
// each accepts, its default and what 0 means where 0 is allowed, written once here. The launcher, the ranks
// and `train validate` read them through this file, so a value the ranks would refuse is refused by the
// launcher and by `train validate` first, all at once with the job's other problems.
//
// The rule for waits: a time a wait may take before it gives up (a timeout) is at least 1 s, since 0 would
// make every such wait fail at once; a time train keeps doing something before it moves on (the stop grace,
// the master's linger) may be 0: not at all.
#pragma once

#include "common/environment_map.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace train {

// The variables that hold an integer (seconds, ports, counts), each with its range and default.
enum class IntegerVariable {
  stop_grace_seconds,
  step_timeout_seconds,
  data_timeout_seconds,
  resolve_timeout_seconds,
  peers_timeout_seconds,
  ranks_timeout_seconds,
  master_lost_seconds,
  master_linger_seconds,
  registration_timeout_seconds,
  idle_host_timeout_seconds,
  code_fetch_timeout_seconds,
  code_install_timeout_seconds,
  registration_port,
  ssh_port,
  straggler_intervals,
};

// The variable's value, or its default when unset or empty. Throws ConfigError "environment variable NAME:
// expected ..., got "VALUE"" when it is not a whole number in its range.
int64_t read_integer_variable(const EnvironmentMap& environment, IntegerVariable variable);
std::chrono::seconds read_seconds_variable(const EnvironmentMap& environment, IntegerVariable variable);

// The variables that hold a flag: "0" or "1" (default 0).
enum class FlagVariable {
  // TRAIN_SHARED_GRADIENT_BUFFERS: gradient buffers shared by lifetime; TRAIN_FAST_PATH, its former name, is
  // still read when it is unset (and says so in one log line).
  shared_gradient_buffers,
  ranks_share_gpus,  // TRAIN_RANKS_SHARE_GPUS: more ranks than GPUs, for checks (job/job_description.h)
};
bool read_flag_variable(const EnvironmentMap& environment, FlagVariable variable);
// The ranks' environment, given each variable set only by its former name under its new name too, so that
// the launcher alone says the former name is deprecated (not every rank again).
void add_new_names_of_former_variables(EnvironmentMap& environment);
// TRAIN_STRAGGLER_FACTOR: a number above 1, at most 1000 (default 1.5).
double read_straggler_factor_variable(const EnvironmentMap& environment);

// What is wrong with any of the variables above in `environment`, one message per variable (as the readers
// would throw them); empty when all are good.
std::vector<std::string> train_variable_problems(const EnvironmentMap& environment);

// The names and defaults of every variable above, for checking docs/environment.md's table against them.
struct VariableDefault {
  std::string_view name;
  std::string default_text;
};
std::vector<VariableDefault> checked_train_variables();

}  // namespace train
