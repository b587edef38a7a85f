// What pip's output says went wrong: its first error line, and the package it was at.
#include "entrypoint/user_code/code_install.h"

#include <catch2/catch.hpp>

using namespace train::user_code;

TEST_CASE("pip failure: the first error line and the package pip was at", "[user_code]") {
  const std::vector<std::string> missing = {
      "Looking in links: /links",
      "ERROR: Could not find a version that satisfies the requirement nosuchpkg==1.0 (from versions: none)",
      "ERROR: No matching distribution found for nosuchpkg==1.0"};
  auto failure = pip_failure(missing);
  CHECK(failure.error == missing[1]);
  CHECK(failure.package.empty());

  const std::vector<std::string> broken = {
      "Processing /code",
      "Collecting brokenpkg==1.0",
      "  Preparing metadata (setup.py): finished with status 'error'",
      "  error: subprocess-exited-with-error",
      "  RuntimeError: brokenpkg cannot be built here",
      "error: metadata-generation-failed",
      "note: This is an issue with the package mentioned above, not pip."};
  failure = pip_failure(broken);
  CHECK(failure.error == "error: metadata-generation-failed");
  CHECK(failure.package == "brokenpkg==1.0");

  failure = pip_failure({"Collecting x", "Killed", ""});
  CHECK(failure.error == "Killed");  // no error line: its last words
  CHECK(failure.package == "x");
  CHECK(pip_failure({}).error.empty());
}
