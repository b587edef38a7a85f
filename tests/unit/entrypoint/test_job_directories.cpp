// The folders the launcher tries before anything starts (entrypoint/job_directories.h): model/, output/,
// checkpoints/ and $TMPDIR, and what it says about those it cannot write.
#include "entrypoint/job_directories.h"

#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

using namespace train;

using train::testing::TempJobDir;

TEST_CASE("job directories: $TMPDIR is tried with model/, output/ and the checkpoint and TensorBoard folders",
          "[launch]") {
  const JobPaths paths;  // /opt/ml
  CHECK(temporary_directory({}) == "/tmp");
  CHECK(temporary_directory({{"TMPDIR", ""}}) == "/tmp");
  CHECK(temporary_directory({{"TMPDIR", "/scratch"}}) == "/scratch");
  // Where checkpointconfig.json and tensorboardoutputconfig.json moved them, not the defaults.
  const OutputLocations moved{"/mnt/checkpoints", "/mnt/tensorboard"};
  CHECK(job_output_directories(paths, &moved, {{"TMPDIR", "/scratch"}}) ==
        std::vector<std::filesystem::path>{paths.model(), paths.output(), "/mnt/checkpoints", "/mnt/tensorboard",
                                           "/scratch"});
  CHECK(job_output_directories(paths, nullptr, {}) ==
        std::vector<std::filesystem::path>{paths.model(), paths.output(), "/tmp"});
}

TEST_CASE("job directories: a folder that cannot be made is named with its errno", "[launch]") {
  TempJobDir scratch;
  scratch.write("a-file", "not a folder");
  const auto file = scratch.root() / "a-file";
  const auto writable = scratch.root() / "tmp";
  const auto problems = unwritable_directories({writable, file / "tmp"});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].directory == file / "tmp");
  CHECK(problems[0].error == ENOTDIR);
  CHECK(std::filesystem::is_directory(writable));
  CHECK(std::filesystem::is_empty(writable));  // the check's file is removed

  std::vector<std::string> details;
  const std::string summary = describe_unwritable(problems, details);
  CHECK(summary == "The job cannot write its results: " + (file / "tmp").string() + " (Not a directory).");
  REQUIRE(details.size() == 2);
  CHECK(details[1].find("$TMPDIR (/tmp when unset)") != std::string::npos);
}
