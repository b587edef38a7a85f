// The program a script-mode job names (sagemaker_program) and what its folder asks to be installed, as the
// toolkit decides them (sagemaker_training: process.validate_entry_point, _entry_point_type.get,
// entry_point.install, modules.install and install_requirements). docs/script-mode.md lists the differences.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train::user_code {

enum class ProgramKind {
  python_package,  // the folder is a package: installed with pip, run as `python3 -m MODULE`
  python_program,  // a .py: `python3 PROGRAM`, after requirements.txt
  command,         // anything else (a .sh, an executable): run as it is, made executable first
};
std::string_view to_string(ProgramKind kind);  // "a Python package", for sentences
std::string_view kind_name(ProgramKind kind);  // "python_package", for machines

// Why `program` cannot name an entry point, by the toolkit's rule: a relative path of letters, digits and
// ". _ + - /" that does not start with '-' or '/' and has no "." or ".." segment; nullopt when it can.
std::optional<std::string> program_name_problem(const std::string& program);

// The toolkit's choice, in its order: a name ending ".sh" is a command; a folder with setup.py is a package,
// and here also one whose pyproject.toml declares one ([project] or [build-system]: a pyproject.toml that only
// configures tools, [tool.black], is no package); then a name ending ".py" is a Python program; anything else
// a command.
ProgramKind program_kind(const std::filesystem::path& folder, const std::string& program);

// Whether a pyproject.toml's text declares a package: a [project] (or [project.*]) or [build-system] table.
bool pyproject_declares_package(std::string_view text);

// Why the program cannot be run from `folder`: it is not there (saying what the folder holds), or it leads
// out of the folder through a link; nullopt when it is a file inside.
std::optional<std::string> program_missing(const std::filesystem::path& folder, const std::string& program);

// The pip command the toolkit runs in the folder for `kind`, with `python` as its interpreter: a package
// `PYTHON -m pip install .` (plus `-r requirements.txt` when the folder has one), a Python program with a
// requirements.txt `PYTHON -m pip install -r requirements.txt`; empty when there is nothing to install.
std::vector<std::string> install_command(const std::filesystem::path& folder, ProgramKind kind,
                                         const std::string& python);

}  // namespace train::user_code
