// Why exec(2) refused a command with E2BIG ("Argument list too long"), in words a user can act on. Linux
// limits each argument and each NAME=VALUE environment entry to MAX_ARG_STRLEN (32 pages: 128 KiB), and all
// of them together to ARG_MAX (a quarter of the stack limit). The SageMaker toolkit's conventions put every
// hyperparameter into the environment several times (SM_HPS, SM_HP_<NAME>, SM_TRAINING_ENV, SM_USER_ARGS)
// and onto the command line, so one large hyperparameter is what usually breaks them.
#pragma once

#include "common/environment_map.h"

#include <nlohmann/json.hpp>

#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace train {

// What made `argv` with `environment` too long for exec: the arguments and variables over the limit (or,
// when none is alone, the largest ones against the total limit), the hyperparameter of `hyperparameters`
// (the decoded hyperparameters.json) they hold when one stands out, and what to do.
std::string explain_argument_list_too_long(const std::vector<std::string>& argv, const EnvironmentMap& environment,
                                           const nlohmann::json& hyperparameters);

// That explanation when `error` is spawn_child's SpawnError for E2BIG; nothing for any other failure.
std::optional<std::string> explain_if_argument_list_too_long(const std::exception& error,
                                                             const std::vector<std::string>& argv,
                                                             const EnvironmentMap& environment,
                                                             const nlohmann::json& hyperparameters);

}  // namespace train
