// The README's hyperparameter table is generated from the schema: this fails when they differ, or when the
// README has lost the markers that delimit the table. The README's table of TRAIN_* variables shows the
// defaults that common/train_variables.cpp has.
#include "common/train_variables.h"
#include "job/hyperparameter_schema.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#ifndef TRAIN_SOURCE_DIR
#error "TRAIN_SOURCE_DIR must name the source tree (set by tests/unit/CMakeLists.txt)"
#endif

namespace {

const std::string begin_marker = "<!-- hyperparameters:begin -->";
const std::string end_marker = "<!-- hyperparameters:end -->";

}  // namespace

TEST_CASE("README: the hyperparameter table is the schema's", "[readme]") {
  const std::string path = std::string(TRAIN_SOURCE_DIR) + "/README.md";
  std::ifstream file(path, std::ios::binary);
  INFO("README: " << path);
  REQUIRE(file.good());
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string readme = buffer.str();

  // The markers are whole lines.
  const auto begin_line = readme.find(begin_marker + "\n");
  if (begin_line == std::string::npos || (begin_line > 0 && readme[begin_line - 1] != '\n')) {
    FAIL("README.md has no line `" << begin_marker << "`: put the output of `train hyperparameters` between a line "
                                   << begin_marker << " and a line " << end_marker);
  }
  const auto table_start = begin_line + begin_marker.size() + 1;
  const auto end_line = readme.find("\n" + end_marker, table_start - 1);
  if (end_line == std::string::npos) {
    FAIL("README.md has `" << begin_marker << "` but no line `" << end_marker << "` after it");
  }
  const std::string table = readme.substr(table_start, end_line + 1 - table_start);
  INFO("regenerate the table between the markers with `build/train hyperparameters`");
  REQUIRE(table == train::hyperparameter_table_markdown());
  CHECK(readme.find(begin_marker, table_start) == std::string::npos);  // one table only
}

TEST_CASE("README table: one row per schema entry, in schema order", "[readme]") {
  const std::string table = train::hyperparameter_table_markdown();
  const auto& schema = train::hyperparameter_schema();
  size_t lines = 0, position = 0;
  for (const auto& spec : schema) {
    const std::string row_start = "| `" + std::string(spec.name) + "` |";
    auto found = table.find("\n" + row_start, position);
    INFO(spec.name);
    REQUIRE(found != std::string::npos);
    position = found + 1;
  }
  for (char c : table) lines += c == '\n';
  CHECK(lines == schema.size() + 2);  // header and separator
  CHECK(table.rfind("| name | type | default | allowed | meaning |\n|---|---|---|---|---|\n", 0) == 0);
  CHECK(table.find("| `epochs` | int | `30` | a positive integer | passes over the training data |\n") !=
        std::string::npos);
  CHECK(table.find("| `custom_mpi_options` | string | (empty) |") != std::string::npos);
}

TEST_CASE("README: every checked TRAIN_* variable is in the environment table with its default", "[readme]") {
  std::ifstream file(std::string(TRAIN_SOURCE_DIR) + "/README.md", std::ios::binary);
  REQUIRE(file.good());
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string readme = buffer.str();
  for (const auto& variable : train::checked_train_variables()) {
    const std::string row = "\n| `" + std::string(variable.name) + "` | `" + variable.default_text + "`";
    INFO(row.substr(1));
    CHECK(readme.find(row) != std::string::npos);
  }
}
