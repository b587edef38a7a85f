// What every host of a job must agree on, compared before the first step. Hosts given different
// hyperparameters trained to the last step and then failed with "parameters diverged ... a bug in train",
// blaming a host at random (issue 31). The master's launcher exports its own account to every rank
// (TRAIN_JOB_AGREEMENT, through mpirun); each rank holds its own host's job description against it before it
// trains or runs the command, and the report names the host that differs and what: the hyperparameters
// (sagemaker_* included), the channels and how each is delivered (inputdataconfig.json), and, for a user's
// command, the file of its code. The master's are the reference.
#pragma once

#include "common/environment_map.h"
#include "job/job_description.h"

#include <optional>
#include <string>
#include <vector>

namespace train {

constexpr const char* host_agreement_variable = "TRAIN_JOB_AGREEMENT";

struct AgreementItem {
  std::string section;  // "the hyperparameters", "the channels", "the program's files"
  std::string what;     // `hyperparameter "learning_rate"`, `channel "train"`, `the program's file "train.py"`
  std::string digest;   // FNV-1a 64 of the value, 16 hex digits
  std::string shown;    // the value as a message shows it: ASCII, at most 60 characters
};

// This host's items. `program`: a user's command (`train -- CMD`), whose first word that names a regular file
// (from the working directory, as mpirun starts every rank in the launcher's) outside the directories of PATH
// is its code: run.sh of `/bin/sh run.sh`, train.py of `python3 train.py`, `/opt/ml/code/train`. Empty for
// train's own training.
std::vector<AgreementItem> host_agreement_items(const JobDescription& job, const std::vector<std::string>& program);

// The text the master exports: every item, or one per section when that would not fit an environment
// variable (32 KiB: 10,000 channels), which still names the section that differs.
std::string encode_host_agreement(const std::vector<AgreementItem>& items);

// Each difference between the master's text and this host's items, in words; empty when they agree, or when
// `masters` is not such a text.
std::vector<std::string> host_differences(const std::string& masters, const std::vector<AgreementItem>& mine,
                                          const std::string& master_host, const std::string& this_host);

// The report's first line (`Host algo-3's job description differs from the master algo-1's: ...`), the other
// differences and what to do below it; nullopt when this host agrees with the master (or no account of the
// master's is in `environment`: a job of one host).
std::optional<std::string> host_disagreement(const JobDescription& job, const EnvironmentMap& environment,
                                             const std::vector<std::string>& program);

}  // namespace train
