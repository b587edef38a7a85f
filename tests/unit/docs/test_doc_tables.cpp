// The reference pages' generated and checked tables: docs/hyperparameters.md holds the hyperparameter table
// generated from the schema (this fails when they differ, or when the page has lost the markers that delimit
// the table, or when another page holds a copy of it), and docs/environment.md's table of TRAIN_* variables
// shows the defaults that common/train_variables.cpp has.
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

// A documentation file of the source tree, whole; fails the test when it cannot be read.
std::string read_doc(const std::string& relative_path) {
  const std::string path = std::string(TRAIN_SOURCE_DIR) + "/" + relative_path;
  std::ifstream file(path, std::ios::binary);
  INFO("reading " << path);
  REQUIRE(file.good());
  std::stringstream buffer;
  buffer << file.rdbuf();
  return buffer.str();
}

}  // namespace

TEST_CASE("docs: the hyperparameter table in docs/hyperparameters.md is the schema's", "[docs]") {
  const std::string page = read_doc("docs/hyperparameters.md");

  // The markers are whole lines.
  const auto begin_line = page.find(begin_marker + "\n");
  if (begin_line == std::string::npos || (begin_line > 0 && page[begin_line - 1] != '\n')) {
    FAIL("docs/hyperparameters.md has no line `" << begin_marker
                                                 << "`: put the output of `train hyperparameters` between a line "
                                                 << begin_marker << " and a line " << end_marker);
  }
  const auto table_start = begin_line + begin_marker.size() + 1;
  const auto end_line = page.find("\n" + end_marker, table_start - 1);
  if (end_line == std::string::npos) {
    FAIL("docs/hyperparameters.md has `" << begin_marker << "` but no line `" << end_marker << "` after it");
  }
  const std::string table = page.substr(table_start, end_line + 1 - table_start);
  INFO("regenerate the table between the markers with scripts/update_hyperparameter_table.sh");
  REQUIRE(table == train::hyperparameter_table_markdown());
  CHECK(page.find(begin_marker, table_start) == std::string::npos);  // one table only
}

TEST_CASE("docs: the README holds no copy of the hyperparameter table", "[docs]") {
  const std::string readme = read_doc("README.md");
  CHECK(readme.find(begin_marker) == std::string::npos);
  CHECK(readme.find("| name | type | default | allowed | meaning |") == std::string::npos);
}

TEST_CASE("docs: the hyperparameter table has one row per schema entry, in schema order", "[docs]") {
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

TEST_CASE("docs: every checked TRAIN_* variable is in docs/environment.md's table with its default", "[docs]") {
  const std::string page = read_doc("docs/environment.md");
  for (const auto& variable : train::checked_train_variables()) {
    const std::string row = "\n| `" + std::string(variable.name) + "` | `" + variable.default_text + "`";
    INFO(row.substr(1));
    CHECK(page.find(row) != std::string::npos);
  }
}
