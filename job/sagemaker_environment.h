// The SM_* variables the SageMaker training toolkit exports to what it runs, with the same names and
// encodings (names upper-cased, hyphens kept; strings as they are, everything else compact sorted
// ASCII JSON). Each rank computes them from its own host's job description, so every rank sees its own
// host's values (the toolkit exported the master's to all).
#pragma once

#include "common/environment_map.h"
#include "job/job_description.h"

#include <nlohmann/json.hpp>

#include <string>

namespace train {

EnvironmentMap sagemaker_variables(const JobDescription& job);

// The toolkit's encoding of one value: strings as they are, null as "", the rest as compact JSON with
// sorted keys and non-ASCII escaped.
std::string encode_environment_value(const nlohmann::json& value);

}  // namespace train
