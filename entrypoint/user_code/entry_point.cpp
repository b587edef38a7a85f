#include "entrypoint/user_code/entry_point.h"

#include "common/enum_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

namespace train::user_code {

namespace {

constexpr EnumName<ProgramKind> kind_names[] = {
    {ProgramKind::python_package, "python_package"},
    {ProgramKind::python_program, "python_program"},
    {ProgramKind::command, "command"},
};

bool safe_character(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '+' || c == '-' || c == '/';
}

// A byte a message can show as it is: printable ASCII, or part of a UTF-8 character.
std::string printable(std::string_view text) {
  std::string shown;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    shown += byte >= 0x20 && byte != 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", byte);
  }
  return shown;
}

// The characters of `program` that may not name it, each whole (a UTF-8 sequence is one character, so that
// "tr\u00e4in.py" is said to hold '\u00e4', not two stray bytes), shown printable.
std::set<std::string> unsupported_characters(std::string_view program) {
  std::set<std::string> found;
  for (size_t i = 0; i < program.size();) {
    size_t length = 1;
    if (static_cast<unsigned char>(program[i]) >= 0xc0) {
      while (i + length < program.size() && (static_cast<unsigned char>(program[i + length]) & 0xc0) == 0x80) {
        ++length;
      }
    }
    const auto byte = static_cast<unsigned char>(program[i]);
    if (length == 1 && byte >= 0x80) {
      found.insert(fmt::format("\\x{:02x}", byte));  // no UTF-8 character: shown as its byte
    } else if (length > 1 || !safe_character(program[i])) {
      found.insert(printable(program.substr(i, length)));
    }
    i += length;
  }
  return found;
}

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// What the folder holds, for a message: its first names in sorted order.
std::string folder_listing(const std::filesystem::path& folder) {
  constexpr size_t shown = 20;
  std::vector<std::string> names;
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    names.push_back(it->path().filename().string() + (it->is_directory(error) ? "/" : ""));
  }
  if (error && names.empty()) return fmt::format("which cannot be read ({})", error.message());
  if (names.empty()) return "which is empty";
  std::sort(names.begin(), names.end());
  const size_t more = names.size() > shown ? names.size() - shown : 0;
  names.resize(std::min(names.size(), shown));
  return fmt::format("which holds {}{}", fmt::join(names, ", "), more ? fmt::format(" and {} more", more) : "");
}

}  // namespace

std::string_view to_string(ProgramKind kind) {
  switch (kind) {
    case ProgramKind::python_package: return "a Python package";
    case ProgramKind::python_program: return "a Python program";
    case ProgramKind::command: return "a command";
  }
  return "?";
}

std::string_view kind_name(ProgramKind kind) { return name_of(kind_names, kind); }

std::optional<std::string> program_name_problem(const std::string& program) {
  const std::string fix = "name the program relative to the code folder, such as train.py or bin/train.sh";
  if (program.empty()) return fmt::format("the program's name is empty: {}", fix);
  const std::set<std::string> unsupported = unsupported_characters(program);
  if (!unsupported.empty()) {
    std::vector<std::string> shown;
    for (const auto& character : unsupported) shown.push_back(fmt::format("'{}'", character));
    return fmt::format("the program \"{}\" contains {}: only letters, digits and . _ + - / may name it; {}",
                       printable(program), fmt::join(shown, ", "), fix);
  }
  if (program.front() == '-') {
    return fmt::format("the program \"{}\" starts with '-', which is read as an option; {}", program, fix);
  }
  if (program.front() == '+') {
    // The toolkit's rule: a name starts with a letter, a digit, '.' or '_'.
    return fmt::format("the program \"{}\" starts with '+'; {}", program, fix);
  }
  if (program.front() == '/') return fmt::format("the program \"{}\" is an absolute path; {}", program, fix);
  std::string_view rest(program);
  while (true) {
    const size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    if (segment.empty() || segment == "." || segment == "..") {
      return fmt::format("the program \"{}\" has an empty, '.' or '..' segment; {}", program, fix);
    }
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return std::nullopt;
}

bool pyproject_declares_package(std::string_view text) {
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] != '[') continue;
    const size_t close = line.find(']', start);
    if (close == std::string::npos) continue;
    std::string table = line.substr(start + 1, close - start - 1);
    table.erase(std::remove_if(table.begin(), table.end(), [](char c) { return c == ' ' || c == '\t'; }),
                table.end());
    // [project.scripts] and the like define [project] too.
    if (table == "project" || table.rfind("project.", 0) == 0 || table == "build-system") return true;
  }
  return false;
}

ProgramKind program_kind(const std::filesystem::path& folder, const std::string& program) {
  if (ends_with(program, ".sh")) return ProgramKind::command;
  std::error_code error;
  if (std::filesystem::exists(folder / "setup.py", error)) return ProgramKind::python_package;
  if (std::filesystem::is_regular_file(folder / "pyproject.toml", error) &&
      pyproject_declares_package(read_text(folder / "pyproject.toml"))) {
    return ProgramKind::python_package;
  }
  if (ends_with(program, ".py")) return ProgramKind::python_program;
  return ProgramKind::command;
}

std::optional<std::string> program_missing(const std::filesystem::path& folder, const std::string& program) {
  std::error_code error;
  const auto path = folder / program;
  if (!std::filesystem::exists(path, error)) {
    return fmt::format("the program \"{}\" is not in the code folder {}, {}", program, folder.string(),
                       folder_listing(folder));
  }
  const auto root = std::filesystem::canonical(folder, error);
  const auto resolved = std::filesystem::canonical(path, error);
  const auto relative = resolved.lexically_relative(root);
  if (error || relative.empty() || *relative.begin() == "..") {
    return fmt::format("the program \"{}\" leads out of the code folder {} (to {}): it must be a file inside it",
                       program, folder.string(), resolved.string());
  }
  if (!std::filesystem::is_regular_file(resolved, error)) {
    return fmt::format("the program \"{}\" in the code folder {} is not a file", program, folder.string());
  }
  return std::nullopt;
}

std::vector<std::string> install_command(const std::filesystem::path& folder, ProgramKind kind,
                                         const std::string& python) {
  std::error_code error;
  const bool requirements = std::filesystem::exists(folder / "requirements.txt", error);
  std::vector<std::string> command = {python, "-m", "pip", "install"};
  if (kind == ProgramKind::python_package) {
    command.push_back(".");
    if (requirements) command.insert(command.end(), {"-r", "requirements.txt"});
    return command;
  }
  if (kind == ProgramKind::python_program && requirements) {
    command.insert(command.end(), {"-r", "requirements.txt"});
    return command;
  }
  return {};
}

}  // namespace train::user_code
