// custom_mpi_options as the SageMaker training toolkit reads them (mpi.py): the text is split into words,
// `--NCCL_DEBUG VALUE` (or `--NCCL_DEBUG=VALUE`, or an unambiguous abbreviation such as `--NCCL_DEB`, as
// Python's argparse accepts) is taken out and becomes NCCL's NCCL_DEBUG on every rank, and every other word
// goes to mpirun as it is, in order. The toolkit splits on white space only; train splits like a shell
// (quotes and backslashes), which gives the same words for any text without quotes and lets a value hold
// a space.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace train {

struct CustomMpiOptions {
  std::vector<std::string> arguments;     // for mpirun, in the order given
  std::optional<std::string> nccl_debug;  // the last --NCCL_DEBUG value, when one was given
};

// Splits a command line like a POSIX shell does for words: quotes and backslashes, no expansion.
// Throws ConfigError naming `what` on an unbalanced quote.
std::vector<std::string> split_shell_words(const std::string& line, const std::string& what);

// `what` names the setting in messages. Throws ConfigError on an unbalanced quote or a --NCCL_DEBUG
// without a value.
CustomMpiOptions parse_custom_mpi_options(const std::string& text, const std::string& what);

}  // namespace train
