// The SM_* variables the SageMaker training toolkit exports to what it runs, with the same names and
// encodings (names upper-cased as Python's str.upper() does, hyphens kept; strings as they are, everything
// else compact sorted ASCII JSON). Each rank computes them from its own host's job description, so every
// rank sees its own host's values (the toolkit exported the master's to all).
#pragma once

#include "common/environment_map.h"
#include "job/job_description.h"
#include "job/python_value.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace train {

// The SM_* variables, and the toolkit's other variables of a rank's environment (CURRENT_HOST,
// SAGEMAKER_JOB_NAME, SAGEMAKER_REGION). `environment` is the launcher's (TRAINING_JOB_NAME,
// SAGEMAKER_PROGRAM, SAGEMAKER_TRAINING_MODULE, AWS_DEFAULT_REGION are read from it).
EnvironmentMap sagemaker_variables(const JobDescription& job, const EnvironmentMap& environment = {});

// The user's hyperparameters as the toolkit hands them to the user's program (SM_HPS): every key of
// hyperparameters.json except the platform's, train's launcher keys (processes_per_host,
// custom_mpi_options) included, as the toolkit decodes them.
PythonValue user_hyperparameters(const JobDescription& job);

// The command-line arguments the toolkit's runner appends to the user's program (SM_USER_ARGS): `--key
// value` for each user hyperparameter in sorted order (`-k` for a one-letter key), values as Python's str()
// writes them, a dict as "k=v,k2=v2".
std::vector<std::string> user_command_arguments(const JobDescription& job);

// What the toolkit's command line and environment cannot carry, one problem per hyperparameter (or variable),
// naming it: a user hyperparameter whose name, argument or SM_HP_ value holds a NUL character, and any other
// SM_* value that would (C strings end at a NUL: the argument and SM_HP_X were cut there while SM_HPS kept it,
// and a key "a\u0000b" became --a; the toolkit's Python refuses them: "embedded null byte"). Inside a list or
// a dict's JSON a NUL is escaped, and passes. Empty when everything can be passed as it is.
std::vector<std::string> what_no_command_can_carry(const JobDescription& job, const EnvironmentMap& environment = {});

// NeuronCores on this host as the toolkit counts them for SM_NUM_NEURONS: 64 on a trn2.48xlarge. (The
// toolkit asks `neuron-ls` elsewhere; this image has no Neuron tools, so any other host counts 0.)
int neuron_cores(const std::string& instance_type);

// The toolkit's encoding of one value (its mapping.to_env_vars): strings as they are, None as "", the rest
// as Python's json.dumps with sorted keys, compact separators and non-ASCII escaped.
std::string encode_environment_value(const PythonValue& value);

}  // namespace train
