// Starting a program: execvpe's PATH search, and /bin/sh only for what can be a shell script (issue 31: a
// wrong-architecture executable ran through /bin/sh, "Syntax error", exit 2, instead of "Exec format error").
#include "entrypoint/child_process.h"
#include "entrypoint/program_exec.h"
#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace train;
using train::testing::TempFolder;

namespace {

std::string write_program(const std::filesystem::path& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
  REQUIRE(::chmod(path.c_str(), 0755) == 0);
  return path.string();
}

// Runs `argv` with spawn_child; the child's exit status, or the errno of a start that failed.
struct Started {
  std::optional<int> status;
  int error = 0;
};
Started start(const std::vector<std::string>& argv) {
  Started started;
  try {
    SpawnOptions options;
    options.capture_output = false;
    ChildProcess child = spawn_child(argv, current_environment(), options);
    int status = 0;
    REQUIRE(::waitpid(child.pid, &status, 0) == child.pid);
    started.status = status;
  } catch (const SpawnError& error) {
    started.error = error.error;
  }
  return started;
}

// /bin/true with its ELF header's machine set to AArch64: an executable of another architecture.
std::string other_architecture_elf() {
  std::ifstream in("/bin/true", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 20);
  bytes[18] = static_cast<char>(183);
  bytes[19] = 0;
  return bytes;
}

}  // namespace

TEST_CASE("program exec: what can be a shell script when the kernel will not run it", "[program_exec]") {
  CHECK(can_be_shell_script("echo hello\n"));
  CHECK(can_be_shell_script(""));                               // an empty file: sh runs nothing
  CHECK(can_be_shell_script("echo hello\n\x01\x02" + std::string(1, '\0')));  // only the first line counts
  CHECK(can_be_shell_script("\x1b[1mcaf\xc3\xa9\t\r\n"));        // escape, UTF-8, tab, carriage return
  CHECK(can_be_shell_script(std::string(200, 'a') + '\x01'));    // beyond the 128 bytes read
  CHECK_FALSE(can_be_shell_script("#!/usr/bin/env python3\nprint(1)\n"));  // its interpreter could not run
  CHECK_FALSE(can_be_shell_script("\x7f" "ELF\x02\x01\x01"));   // an ELF file (of another architecture, or cut)
  CHECK_FALSE(can_be_shell_script(std::string("ab\0cd\n", 6)));  // a NUL on the first line
  CHECK_FALSE(can_be_shell_script("echo \x01\n"));
}

TEST_CASE("program exec: /bin/sh (dash) refuses exactly the first lines can_be_shell_script refuses",
          "[program_exec]") {
  // The oracle: Debian's /bin/sh, dash, which runs the toolkit's `/bin/sh -c ./ENTRY` (it says "Exec format
  // error" and exits 126 for what it takes for a binary). Each byte value leads a first line of its own.
  char target[PATH_MAX];
  const ssize_t length = ::readlink("/bin/sh", target, sizeof target - 1);
  REQUIRE(length > 0);
  REQUIRE(std::string(target, static_cast<size_t>(length)).find("dash") != std::string::npos);  // else no oracle
  TempFolder folder("train-program-exec");
  const auto file = folder.path() / "program";
  std::vector<int> disagree;
  for (int byte = 0; byte < 256; ++byte) {
    const std::string content = std::string(1, static_cast<char>(byte)) + "true\n";
    write_program(file, content);
    const std::string command = "cd " + folder.path().string() + " && /bin/sh -c ./program >/dev/null 2>&1";
    const int status = std::system(command.c_str());
    REQUIRE(WIFEXITED(status));
    const bool dash_refused = WEXITSTATUS(status) == 126;
    if (dash_refused == can_be_shell_script(content)) disagree.push_back(byte);
  }
  CHECK(disagree.empty());
}

TEST_CASE("program exec: a file the kernel refuses runs through /bin/sh only when it can be a script",
          "[program_exec]") {
  TempFolder folder("train-program-exec");
  const auto marker = folder.path() / "ran";
  const std::string script =
      write_program(folder.path() / "script", "echo \"$0 $1\" > " + marker.string() + "\nexit 7\n");
  Started ran = start({script, "argument"});
  REQUIRE(ran.status);
  CHECK(WEXITSTATUS(*ran.status) == 7);
  std::ifstream written(marker);
  std::string line;
  std::getline(written, line);
  CHECK(line == script + " argument");  // as execvp runs it: /bin/sh SCRIPT ARGUMENTS...

  CHECK(start({write_program(folder.path() / "other-arch", other_architecture_elf())}).error == ENOEXEC);
  CHECK(start({write_program(folder.path() / "cut", "\x7f" "ELF\x02\x01")}).error == ENOEXEC);
  CHECK(start({write_program(folder.path() / "noise", "\x93\x02(\xc7)\n")}).error == ENOEXEC);
  const std::string not_a_program = write_program(folder.path() / "not-a-program", "\x01\x02\n");
  CHECK(start({write_program(folder.path() / "shebang", "#!" + not_a_program + "\necho hello\n")}).error == ENOEXEC);
}

TEST_CASE("program exec: the PATH search is execvpe's", "[program_exec]") {
  TempFolder folder("train-program-exec");
  std::filesystem::create_directories(folder.path() / "a");
  std::filesystem::create_directories(folder.path() / "b");
  write_program(folder.path() / "b" / "tool", "exit 5\n");
  std::ofstream(folder.path() / "a" / "tool") << "exit 4\n";  // not executable: skipped, as execvpe skips it
  const char* saved = std::getenv("PATH");
  const std::string saved_path = saved != nullptr ? saved : "";
  ::setenv("PATH", ((folder.path() / "missing").string() + ":" + (folder.path() / "a").string() + ":" +
                    (folder.path() / "b").string()).c_str(), 1);
  Started found = start({"tool"});
  Started missing = start({"no-such-tool"});
  ::setenv("PATH", (folder.path() / "a").string().c_str(), 1);
  Started not_permitted = start({"tool"});
  ::unsetenv("PATH");
  Started default_path = start({"true"});  // glibc's "/bin:/usr/bin"
  if (saved != nullptr) ::setenv("PATH", saved_path.c_str(), 1);
  REQUIRE(found.status);
  CHECK(WEXITSTATUS(*found.status) == 5);
  CHECK(missing.error == ENOENT);
  CHECK(not_permitted.error == EACCES);
  REQUIRE(default_path.status);
  CHECK(WEXITSTATUS(*default_path.status) == 0);
  CHECK(start({""}).error == ENOENT);
}
