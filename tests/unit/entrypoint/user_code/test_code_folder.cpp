// The code folder changes all at once: staged beside it, renamed into place, never left half filled.
#include "entrypoint/user_code/code_folder.h"
#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <fstream>

using namespace train::user_code;
using train::testing::TempFolder;

TEST_CASE("code folder: staged beside it and renamed into place, and a staging folder alone is no code",
          "[user_code]") {
  TempFolder base("train-code-folder");
  const auto code = base.path() / "code";
  CHECK_FALSE(holds_code(code));  // not there yet
  {
    CodeStaging staging(code);
    CHECK(std::filesystem::is_directory(code));  // made, as the toolkit makes it
    CHECK_FALSE(holds_code(code));
    CHECK(staging.unpacked().parent_path().parent_path() == base.path());
    std::ofstream(staging.unpacked() / "train.py") << "print(1)\n";
    CHECK_FALSE(std::filesystem::exists(code / "train.py"));
    staging.move_into_place();
  }
  CHECK(holds_code(code));
  CHECK(base.entries() == std::set<std::string>{"code"});  // the staging folder went with its owner
  CHECK(base.entries("code") == std::set<std::string>{"train.py"});
}

TEST_CASE("code folder: a fetch that fails leaves the code folder as it was", "[user_code]") {
  TempFolder base("train-code-folder");
  const auto code = base.path() / "code";
  {
    CodeStaging staging(code);
    std::ofstream(staging.unpacked() / "half.py") << "";
  }  // never moved into place
  CHECK_FALSE(holds_code(code));
  CHECK(base.entries() == std::set<std::string>{"code"});
  CHECK(base.entries("code").empty());
}

TEST_CASE("code folder: a staging folder inside the code folder is not code, a file is", "[user_code]") {
  TempFolder base("train-code-folder");
  std::filesystem::create_directories(base.path() / ".train-code-staging-1-abcdef");
  CHECK_FALSE(holds_code(base.path()));
  std::ofstream(base.path() / ".hidden") << "";
  CHECK(holds_code(base.path()));
}
