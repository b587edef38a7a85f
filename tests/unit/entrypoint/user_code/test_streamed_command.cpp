// A helper command run to its end: its lines as they come, its time bounded, its whole group ended.
#include "entrypoint/child_process.h"
#include "entrypoint/user_code/streamed_command.h"
#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <sys/wait.h>
#include <thread>

using namespace train::user_code;
using train::testing::TempFolder;

namespace {

StreamedCommand shell(const std::string& script, std::vector<std::pair<bool, std::string>>* lines = nullptr) {
  StreamedCommand command;
  command.argv = {"/bin/sh", "-c", script};
  command.environment = train::current_environment();
  command.timeout = std::chrono::seconds(60);
  if (lines) command.on_line = [lines](bool error, std::string_view line) { lines->emplace_back(error, line); };
  return command;
}

// Whether `pid` has ended (gone, or a zombie waiting for its parent) within 10 s: a SIGKILL'ed process
// may take a moment to die on a busy machine.
bool ended(pid_t pid) {
  for (int tries = 0; tries < 200; ++tries) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    if (text.empty() || text.substr(text.rfind(')') + 2, 1) == "Z") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

pid_t read_pid(const std::filesystem::path& file) {
  for (int tries = 0; tries < 600; ++tries) {
    std::ifstream in(file);
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

}  // namespace

TEST_CASE("streamed command: each line of both streams, whole, the last one without its newline too",
          "[user_code]") {
  std::vector<std::pair<bool, std::string>> lines;
  TempFolder folder("train-streamed");
  auto command = shell("pwd; printf 'a\\r\\nb'; echo to-stderr >&2; exit 3", &lines);
  command.working_directory = folder.path().string();
  const auto outcome = run_streamed(command);
  CHECK(WIFEXITED(outcome.wait_status));
  CHECK(WEXITSTATUS(outcome.wait_status) == 3);
  CHECK_FALSE(outcome.timed_out);
  CHECK_FALSE(outcome.stopped_by);
  const std::vector<std::pair<bool, std::string>> expected = {
      {false, folder.path().string()}, {false, "a"}, {true, "to-stderr"}, {false, "b"}};
  CHECK(lines == expected);
}

TEST_CASE("streamed command: one that runs out of time is ended with everything it started", "[user_code]") {
  TempFolder folder("train-streamed");
  const auto pid_file = folder.path() / "pid";
  // The shell's child ignores SIGTERM: only the SIGKILL that follows ends it.
  auto command = shell("sh -c 'trap \"\" TERM; echo $$ > " + pid_file.string() + "; sleep 100' & wait");
  command.timeout = std::chrono::seconds(1);
  const auto outcome = run_streamed(command);
  CHECK(outcome.timed_out);
  CHECK_FALSE(outcome.stopped_by);
  const pid_t grandchild = read_pid(pid_file);
  REQUIRE(grandchild > 0);
  CHECK(ended(grandchild));
}

TEST_CASE("streamed command: a stop signal ends it and is said", "[user_code]") {
  auto command = shell("sleep 100");
  command.stop_signal = []() -> std::optional<int> { return SIGTERM; };
  const auto outcome = run_streamed(command);
  CHECK(outcome.stopped_by == SIGTERM);
  CHECK_FALSE(outcome.timed_out);
  CHECK(WIFSIGNALED(outcome.wait_status));
}

TEST_CASE("streamed command: one that cannot start, or whose folder is not there, throws", "[user_code]") {
  StreamedCommand command;
  command.environment = train::current_environment();
  command.argv = {"/no/such/program"};
  CHECK_THROWS_AS(run_streamed(command), train::SpawnError);
  command.argv = {"/bin/true"};
  command.working_directory = "/no/such/folder";
  CHECK_THROWS_WITH(run_streamed(command), Catch::Contains("cannot run /bin/true in /no/such/folder"));
}
