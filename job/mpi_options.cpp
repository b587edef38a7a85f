#include "job/mpi_options.h"

#include "common/config_error.h"
#include "job/hyperparameters.h"

#include <fmt/format.h>

#include <string_view>

namespace train {

namespace {

constexpr std::string_view nccl_debug_option = "--NCCL_DEBUG";

// argparse takes any prefix of a long option that names only one option ("--N" and longer: the toolkit's
// parser knows --NCCL_DEBUG and --help, which starts differently).
bool names_nccl_debug(std::string_view option) {
  return option.size() >= 3 && nccl_debug_option.substr(0, option.size()) == option;
}

}  // namespace

CustomMpiOptions parse_custom_mpi_options(const std::string& text, const std::string& what) {
  const std::vector<std::string> words = split_shell_words(text, what);
  CustomMpiOptions options;
  bool options_ended = false;  // argparse reads nothing after a bare "--" as an option
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "--") options_ended = true;
    const auto equals = word.find('=');
    const std::string_view option = std::string_view(word).substr(0, equals);
    if (options_ended || !names_nccl_debug(option)) {
      options.arguments.push_back(word);
      continue;
    }
    if (equals != std::string::npos) {
      options.nccl_debug = word.substr(equals + 1);
      continue;
    }
    // As argparse: the value is the next word, unless that looks like another option.
    if (i + 1 >= words.size() || (words[i + 1].size() > 1 && words[i + 1][0] == '-')) {
      throw ConfigError(fmt::format("{}: `{}` needs a value, such as `--NCCL_DEBUG WARN` (NCCL's log level: VERSION, "
                                    "WARN, INFO or TRACE)",
                                    what, word));
    }
    options.nccl_debug = words[++i];
  }
  return options;
}

}  // namespace train
