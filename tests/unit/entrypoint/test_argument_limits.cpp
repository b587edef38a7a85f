// Why exec refused a command line as too long (E2BIG): the entries over Linux's limits and the hyperparameter
// behind them.
#include "entrypoint/argument_limits.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <unistd.h>

using namespace train;

TEST_CASE("argument limits: one entry over MAX_ARG_STRLEN names it and the hyperparameter it holds", "[launch]") {
  const size_t one_limit = 32 * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const std::string big(one_limit + 10, 'x');
  const nlohmann::json hyperparameters = {{"lr", 0.1}, {"vocabulary", big}};
  const std::string text = explain_argument_list_too_long(
      {"python3", "train.py", "--lr", "0.1", "--vocabulary", big},
      {{"PATH", "/usr/bin"}, {"SM_HP_VOCABULARY", big}, {"SM_HPS", "{\"vocabulary\": \"" + big + "\"}"}},
      hyperparameters);
  CHECK_THAT(text, Catch::StartsWith(fmt::format("the hyperparameter `vocabulary` ({} bytes) makes SM_HPS (", big.size())));
  CHECK_THAT(text, Catch::Contains(fmt::format("SM_HP_VOCABULARY ({} bytes)", 17 + big.size() + 1)));
  CHECK_THAT(text, Catch::Contains(fmt::format("argument 5 ({} bytes)", big.size() + 1)));
  CHECK_THAT(text, Catch::Contains(fmt::format("longer than the {} bytes Linux allows one argument", one_limit)));
  CHECK_THAT(text, Catch::Contains("pass a large value in a file instead"));
  CHECK_THAT(text, !Catch::Contains("PATH ("));
  CHECK_THAT(text, !Catch::Contains("argument 4 ("));
}

TEST_CASE("argument limits: entries too many together, with no hyperparameter to blame", "[launch]") {
  EnvironmentMap environment;
  for (int i = 0; i < 40; ++i) environment["VARIABLE_" + std::to_string(i)] = std::string(100000, 'v');
  const std::string text = explain_argument_list_too_long({"mpirun", "-np", "2"}, environment, nlohmann::json::object());
  CHECK_THAT(text, Catch::StartsWith("the arguments and environment together take "));
  CHECK_THAT(text, Catch::Contains("the largest: VARIABLE_"));
  CHECK_THAT(text, Catch::EndsWith("make the command line or the environment smaller"));
  CHECK_THAT(text, !Catch::Contains("hyperparameter"));
}
