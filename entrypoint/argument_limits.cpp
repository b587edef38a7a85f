#include "entrypoint/argument_limits.h"

#include "entrypoint/child_process.h"

#include <fmt/format.h>

#include <algorithm>
#include <unistd.h>

namespace train {
namespace {

struct Entry {
  std::string what;  // "SM_HPS" (a variable), "argument 3"
  size_t bytes = 0;  // as exec counts it: with its terminating NUL
};

std::string bytes_text(size_t bytes) { return fmt::format("{} bytes", bytes); }

}  // namespace

std::string explain_argument_list_too_long(const std::vector<std::string>& argv, const EnvironmentMap& environment,
                                           const nlohmann::json& hyperparameters) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t one_limit = 32 * page;  // MAX_ARG_STRLEN
  const long arg_max = ::sysconf(_SC_ARG_MAX);
  std::vector<Entry> entries;
  size_t total = 0;
  for (size_t i = 0; i < argv.size(); ++i) {
    entries.push_back({i == 0 ? "the program's name" : fmt::format("argument {}", i), argv[i].size() + 1});
  }
  for (const auto& [name, value] : environment) entries.push_back({name, name.size() + value.size() + 2});
  for (const auto& entry : entries) total += entry.bytes + sizeof(char*);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.bytes > b.bytes; });

  // The hyperparameter behind them: the largest, when it is large enough to matter on its own.
  std::string largest_key;
  size_t largest = 0;
  if (hyperparameters.is_object()) {
    for (const auto& [key, value] : hyperparameters.items()) {
      const size_t size = value.is_string() ? value.get_ref<const std::string&>().size() : value.dump().size();
      if (size > largest) {
        largest = size;
        largest_key = key;
      }
    }
  }
  const std::string cause = largest >= one_limit / 4
                                ? fmt::format("the hyperparameter `{}` ({}) makes ", largest_key, bytes_text(largest))
                                : std::string();
  const std::string advice = largest >= one_limit / 4
                                 ? "pass a large value in a file instead (an input channel, or the source directory) "
                                   "and give the hyperparameter its path"
                                 : "make the command line or the environment smaller";

  std::vector<std::string> named;
  for (const auto& entry : entries) {
    if (entry.bytes > one_limit) named.push_back(fmt::format("{} ({})", entry.what, bytes_text(entry.bytes)));
  }
  if (!named.empty()) {
    return fmt::format("{}{} longer than the {} Linux allows one argument or environment variable: {}", cause,
                       fmt::join(named, ", "), bytes_text(one_limit), advice);
  }
  for (size_t i = 0; i < entries.size() && i < 3; ++i) {
    named.push_back(fmt::format("{} ({})", entries[i].what, bytes_text(entries[i].bytes)));
  }
  return fmt::format("{}the arguments and environment together take {}, more than the {} allowed here (a quarter of "
                     "the stack limit, `ulimit -s`; the largest: {}): {}",
                     cause, bytes_text(total), arg_max > 0 ? bytes_text(static_cast<size_t>(arg_max)) : "limit",
                     fmt::join(named, ", "), advice);
}

std::optional<std::string> explain_if_argument_list_too_long(const std::exception& error,
                                                             const std::vector<std::string>& argv,
                                                             const EnvironmentMap& environment,
                                                             const nlohmann::json& hyperparameters) {
  const auto* spawn = dynamic_cast<const SpawnError*>(&error);
  if (spawn == nullptr || spawn->error != E2BIG) return std::nullopt;
  return explain_argument_list_too_long(argv, environment, hyperparameters);
}

}  // namespace train
