// Starting a program as execvpe(3) does (the PATH search, its order and its errors), but for one thing: glibc
// runs every file the kernel refuses (ENOEXEC) through /bin/sh, so a damaged or wrong-architecture executable
// ran as a shell script ("Syntax error", exit 2) instead of failing with "Exec format error". Here only a file
// that can be a shell script goes to /bin/sh (can_be_shell_script): what a shell does with a command the
// kernel does not know (POSIX's "command search and execution", with the check for binary files that it
// allows: dash, which is /bin/sh in Debian and Ubuntu images and so runs the toolkit's `/bin/sh -c ./ENTRY`,
// and bash both refuse a binary). Python, which runs the toolkit's Python entry points, and Open MPI's daemons
// never fall back to a shell at all; a text file without a shebang line is kept running as it always did.
#pragma once

#include "common/non_copyable.h"

#include <string>
#include <string_view>
#include <vector>

namespace train {

// Whether a file the kernel refused to run may be run by /bin/sh, judged from its first bytes (up to
// shell_script_sample_bytes): not when it starts with "#!" (the kernel read that line and could not run the
// interpreter it names: running the file as shell would run another language), and not when its first line
// holds a NUL or another control character than tab, line feed, vertical tab, form feed, carriage return,
// shift out, shift in or escape (0x7F, ELF's first byte, included), exactly the bytes dash 0.5.12 refuses
// there (tests/unit/entrypoint/test_program_exec.cpp compares the two, byte by byte).
bool can_be_shell_script(std::string_view first_bytes);
constexpr size_t shell_script_sample_bytes = 128;  // what dash reads to decide

// Docker's PATH for an image that sets none: what the job's processes get when `train` starts with no PATH (or
// an empty one). Without it mpirun found neither ssh for its rsh launcher, which it checks even for one host
// ("plm_rsh_agent: ssh : rsh ... could not be found", exit 243), nor the user's command.
constexpr std::string_view default_search_path_variable =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Sets this process's PATH to default_search_path_variable when it has none or an empty one, so that every
// child inherits it; returns whether it did.
bool set_default_path_if_missing();

class ProgramExec : private NonCopyable {
 public:
  // Prepared before fork (this allocates): `argv`, and the paths argv[0] is tried at, searched in this
  // process's PATH as execvpe searches it (glibc's "/bin:/usr/bin" when PATH is unset, an empty entry being the
  // current folder; a name with a slash is tried as it is).
  explicit ProgramExec(const std::vector<std::string>& argv);

  // In the child, after fork: async-signal-safe (execve, open, read, close). Replaces the process, or returns
  // the errno execvpe would have left (EACCES when a candidate was not permitted and none ran, else the last
  // error; ENOEXEC for a file that is not a program and cannot be a shell script).
  int exec(char* const envp[]);

 private:
  int exec_one(const std::string& path, char* const envp[]);

  std::vector<std::string> argv_;
  std::vector<std::string> candidates_;
  std::vector<char*> arguments_;        // argv_ as execve takes it
  std::vector<char*> shell_arguments_;  // "/bin/sh", the candidate (set in the child), argv_[1...], nullptr
  int refusal_ = 0;                     // an errno for a name that cannot be searched (empty, too long)
};

}  // namespace train
