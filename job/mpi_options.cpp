#include "job/mpi_options.h"

#include "common/config_error.h"
#include "common/json_file.h"

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

std::vector<std::string> split_shell_words(const std::string& line, const std::string& what) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote == '\'') {
      if (c == '\'') quote = 0; else word += c;
    } else if (quote == '"') {
      if (c == '"') {
        quote = 0;
      } else if (c == '\\' && i + 1 < line.size() && (line[i + 1] == '"' || line[i + 1] == '\\')) {
        word += line[++i];
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\') {
      if (i + 1 < line.size()) word += line[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0) {
    throw ConfigError(fmt::format("{}: unbalanced {} quote in {}; close it or escape it with a backslash", what,
                                  quote == '"' ? "double" : "single", quote_json_for_message(nlohmann::json(line))));
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

CustomMpiOptions parse_custom_mpi_options(const std::string& text, const std::string& what) {
  if (text.find('\0') != std::string::npos) {
    // mpirun's arguments would be cut there, as would the toolkit's.
    throw ConfigError(fmt::format("{}: {} holds a NUL character, which no command-line argument can carry; remove it",
                                  what, quote_json_for_message(nlohmann::json(text))));
  }
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
