// The program a script-mode job names and what its folder asks to be installed, as the toolkit decides them
// (tests/user_code/test_user_code.py holds the same cases against the toolkit itself).
#include "entrypoint/user_code/entry_point.h"
#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <fstream>

using namespace train::user_code;
using train::testing::TempFolder;

namespace {

void write(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

}  // namespace

TEST_CASE("user code: a program's name follows the toolkit's rule", "[user_code]") {
  for (const char* good : {"train.py", "bin/train.sh", "a_b-c+d.py", ".hidden.py", "pkg/sub/main", "0.py", "a/+b.py",
                           "a/-b.py"}) {
    INFO(good);
    CHECK_FALSE(program_name_problem(good));
  }
  const std::pair<const char*, const char*> bad[] = {
      {"", "is empty"},
      {"-c", "starts with '-'"},
      {"+x.py", "starts with '+'"},
      {"/opt/ml/code/train.py", "is an absolute path"},
      {"my train.py", "contains ' '"},
      {"train.py;rm", "contains ';'"},
      {"tr\xc3\xa4in.py", "contains '\xc3\xa4':"},   // a UTF-8 character is named whole
      {"a\nb\xff.py", "contains '\\x0a', '\\xff':"},  // a control character or a stray byte by its value
      {"../train.py", "'.' or '..' segment"},
      {"./train.py", "'.' or '..' segment"},
      {"a//b.py", "an empty"},
      {"dir/", "an empty"},
  };
  for (const auto& [name, reason] : bad) {
    INFO(name);
    auto problem = program_name_problem(name);
    REQUIRE(problem);
    CHECK_THAT(*problem, Catch::Contains(reason) && Catch::Contains("such as train.py"));
  }
}

TEST_CASE("user code: a pyproject.toml is a package when it declares one, not when it configures tools",
          "[user_code]") {
  CHECK(pyproject_declares_package("[project]\nname = \"x\"\n"));
  CHECK(pyproject_declares_package("# build\n  [ build-system ]\nrequires = []\n"));
  CHECK(pyproject_declares_package("[project.scripts]\nrun = \"x:main\"\n"));
  CHECK_FALSE(pyproject_declares_package("[tool.black]\nline-length = 100\n"));
  CHECK_FALSE(pyproject_declares_package("[tool.projectile]\n[projects]\n"));
  CHECK_FALSE(pyproject_declares_package(""));
}

TEST_CASE("user code: the program's kind in the toolkit's order, and the pip command for it", "[user_code]") {
  TempFolder folder("train-entry-point");
  const auto& code = folder.path();
  write(code / "train.py", "print(1)\n");
  CHECK(program_kind(code, "train.py") == ProgramKind::python_program);
  CHECK(program_kind(code, "train") == ProgramKind::command);
  CHECK(program_kind(code, "train.sh") == ProgramKind::command);
  CHECK(install_command(code, ProgramKind::python_program, "python3").empty());

  write(code / "requirements.txt", "numpy\n");
  CHECK(install_command(code, ProgramKind::python_program, "python3") ==
        std::vector<std::string>{"python3", "-m", "pip", "install", "-r", "requirements.txt"});
  CHECK(install_command(code, ProgramKind::command, "python3").empty());  // the toolkit installs nothing for one

  write(code / "pyproject.toml", "[tool.black]\n");
  CHECK(program_kind(code, "train.py") == ProgramKind::python_program);
  write(code / "pyproject.toml", "[project]\nname = \"x\"\n");
  CHECK(program_kind(code, "train.py") == ProgramKind::python_package);
  std::filesystem::remove(code / "pyproject.toml");

  write(code / "setup.py", "from setuptools import setup\nsetup()\n");
  CHECK(program_kind(code, "train.py") == ProgramKind::python_package);
  CHECK(program_kind(code, "train") == ProgramKind::python_package);
  CHECK(program_kind(code, "train.sh") == ProgramKind::command);  // ".sh" first, as the toolkit has it
  CHECK(install_command(code, ProgramKind::python_package, "/venv/bin/python3") ==
        std::vector<std::string>{"/venv/bin/python3", "-m", "pip", "install", ".", "-r", "requirements.txt"});
  std::filesystem::remove(code / "requirements.txt");
  CHECK(install_command(code, ProgramKind::python_package, "python3") ==
        std::vector<std::string>{"python3", "-m", "pip", "install", "."});
}

TEST_CASE("user code: a program that is not in the code folder is named with what the folder holds",
          "[user_code]") {
  TempFolder folder("train-entry-point");
  const auto& code = folder.path();
  CHECK_THAT(*program_missing(code, "train.py"), Catch::Contains("which is empty"));
  write(code / "main.py", "");
  write(code / "lib/util.py", "");
  CHECK_FALSE(program_missing(code, "main.py"));
  CHECK_FALSE(program_missing(code, "lib/util.py"));
  CHECK_THAT(*program_missing(code, "train.py"),
             Catch::Equals("the program \"train.py\" is not in the code folder " + code.string() +
                           ", which holds lib/, main.py"));
  CHECK_THAT(*program_missing(code, "lib"), Catch::Contains("is not a file"));
  std::filesystem::create_symlink("/etc/hostname", code / "escape.py");
  CHECK_THAT(*program_missing(code, "escape.py"), Catch::Contains("leads out of the code folder"));
  std::filesystem::create_symlink("main.py", code / "alias.py");
  CHECK_FALSE(program_missing(code, "alias.py"));
}
