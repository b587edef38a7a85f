#include "job/train_start.h"

#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <fstream>

using namespace train;

TEST_CASE("train start: a worker host's ranks count from its own launcher's start, others from the variable",
          "[train_start]") {
  testing::TempFolder folder("train-start");
  const auto file = folder.path() / "train-started-at";
  const EnvironmentMap environment = {{train_started_variable, "1000.5"}};
  CHECK(train_start_of_this_host(environment, false, file) == 1000.5);
  CHECK(train_start_of_this_host(environment, true, file) == 1000.5);  // no file: the master's start
  leave_train_start_for_ranks(2000.25, file);
  CHECK(train_start_of_this_host(environment, true, file) == 2000.25);
  CHECK(train_start_of_this_host(environment, false, file) == 1000.5);
  std::ofstream(file) << "not a time";
  CHECK(train_start_of_this_host(environment, true, file) == 1000.5);
  CHECK_FALSE(train_start_of_this_host({{train_started_variable, "soon"}}, false, file));
  CHECK_FALSE(train_start_of_this_host({}, false, file));
}
