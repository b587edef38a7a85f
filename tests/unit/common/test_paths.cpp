// An /opt/ml path a job names, as a job relocated by SAGEMAKER_BASE_DIR sees it.
#include "common/paths.h"

#include <catch2/catch.hpp>

using train::JobPaths;

TEST_CASE("paths: /opt/ml paths follow a relocated job, and may not climb out of it", "[paths]") {
  JobPaths at_home;
  CHECK(at_home.relocated("/opt/ml/code/") == std::filesystem::path("/opt/ml/code/"));  // as it reads
  CHECK(at_home.relocated("/opt/ml/../etc") == std::filesystem::path("/opt/etc"));
  CHECK(at_home.code() == "/opt/ml/code");

  JobPaths moved;
  moved.base = "/tmp/job";
  CHECK(moved.relocated("/opt/ml/code") == std::filesystem::path("/tmp/job/code"));
  CHECK(moved.relocated("/opt/ml/input/./data/code/x.tar.gz") ==
        std::filesystem::path("/tmp/job/input/data/code/x.tar.gz"));
  CHECK(moved.relocated("/opt/ml") == std::filesystem::path("/tmp/job"));
  CHECK(moved.relocated("/srv/code") == std::filesystem::path("/srv/code"));
  CHECK(moved.relocated("/opt/mlx/code") == std::filesystem::path("/opt/mlx/code"));
  CHECK_FALSE(moved.relocated("/opt/ml/../etc"));
  CHECK_FALSE(moved.relocated("/opt/ml/code/../../../etc"));
  CHECK(moved.code() == "/tmp/job/code");
}
