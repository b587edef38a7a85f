// SageMaker's report files: the failure text (one sentence, then the last error lines, within 1024 bytes)
// and how output/failure and output/success are written.
#include "entrypoint/job_report.h"
#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace train;

namespace {

// A throw-away SAGEMAKER_BASE_DIR, removed with its content.
class ReportDir : public testing::TempFolder {
 public:
  ReportDir() : TempFolder("train-report-test") {}

  JobPaths paths() const {
    JobPaths paths;
    paths.base = path();
    return paths;
  }
  // Names of everything in output/, sorted.
  std::vector<std::string> output_entries() const {
    const auto names = entries("output");
    return {names.begin(), names.end()};
  }
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream content;
  content << stream.rdbuf();
  return content.str();
}

void write_file(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream << content;
  if (!stream) throw std::runtime_error("cannot write " + path.string());
}

// True when `text` is well-formed UTF-8 (no cut characters).
bool valid_utf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    unsigned char lead = static_cast<unsigned char>(text[i]);
    size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("failure text: the summary, then the detail lines, when all fit", "[report]") {
  REQUIRE(compose_failure_text("Rank 1 of 4 on host algo-1 exited with code 3.", {"Traceback:", "  boom"}) ==
          "Rank 1 of 4 on host algo-1 exited with code 3.\nTraceback:\n  boom\n");
  REQUIRE(compose_failure_text("Just the summary.", {}) == "Just the summary.\n");
}

TEST_CASE("failure text: never over 1024 bytes, and keeps the LAST detail lines", "[report]") {
  std::vector<std::string> details;
  for (int i = 1; i <= 100; ++i) details.push_back("error line " + std::to_string(i) + std::string(40, '.'));
  const std::string summary = "Rank 2 of 4 on host algo-1 exited with code 1.";
  std::string text = compose_failure_text(summary, details);
  REQUIRE(failure_reason_limit == 1024);
  CHECK(text.size() <= 1024);
  CHECK(text.size() >= 1024 - 60);  // filled, not stopped early
  auto lines = split_lines(text);
  REQUIRE(lines.front() == summary);
  REQUIRE(lines.back() == details.back());
  // What follows the summary is the end of the details: a (possibly cut) line, then whole lines in order.
  const size_t whole = lines.size() - 2;
  for (size_t k = 0; k < whole; ++k) CHECK(lines[lines.size() - 1 - k] == details[details.size() - 1 - k]);
  const std::string& first_kept = lines[1];
  const std::string& its_source = details[details.size() - 1 - whole];
  CHECK(its_source.size() >= first_kept.size());
  CHECK(its_source.compare(its_source.size() - first_kept.size(), first_kept.size(), first_kept) == 0);
  CHECK(text.find("error line 1.") == std::string::npos);
}

TEST_CASE("failure text: a custom limit is honoured exactly", "[report]") {
  for (size_t limit : {20u, 64u, 100u, 333u}) {
    std::string text = compose_failure_text("Summary sentence.", {"alpha", "beta gamma delta", "epsilon"}, limit);
    INFO("limit " << limit);
    CHECK(text.size() <= limit);
    CHECK(text.rfind("Summary sentence.\n", 0) == 0);
  }
  CHECK(compose_failure_text("Summary sentence.", {"alpha", "beta gamma delta", "epsilon"}, 100) ==
        "Summary sentence.\nalpha\nbeta gamma delta\nepsilon\n");
}

TEST_CASE("failure text: cuts never split a UTF-8 character", "[report]") {
  // "é" is 2 bytes, "€" 3, "😀" 4: with every limit, some cut falls inside one.
  std::string summary;
  for (int i = 0; i < 400; ++i) summary += (i % 3 == 0) ? "é" : (i % 3 == 1) ? "€" : "😀";
  std::vector<std::string> details;
  for (int i = 0; i < 50; ++i) details.push_back("détail €" + std::to_string(i) + " 😀😀😀 ünïcödé");
  for (size_t limit = 50; limit <= 1024; limit += 7) {
    INFO("limit " << limit);
    std::string long_summary = compose_failure_text(summary, details, limit);
    CHECK(long_summary.size() <= limit);
    CHECK(valid_utf8(long_summary));
    std::string short_summary = compose_failure_text("Rank 0 of 1 on host algo-1 exited with code 1.", details, limit);
    CHECK(short_summary.size() <= limit);
    CHECK(valid_utf8(short_summary));
    CHECK(short_summary.rfind("Rank 0 of 1 on host algo-1 exited with code 1.\n", 0) == 0);
  }
}

TEST_CASE("failure text: a summary too long on its own is cut, and still ends the first line", "[report]") {
  std::string text = compose_failure_text(std::string(5000, 'x'), {"detail"});
  CHECK(text.size() <= 1024);
  CHECK(text.back() == '\n');
  CHECK(text.find('\n') == text.size() - 1);
  CHECK(text.find("detail") == std::string::npos);
}

TEST_CASE("failure file: written whole, with no temporary file left", "[report]") {
  ReportDir dir;
  const std::string text = compose_failure_text("Rank 1 of 4 on host algo-1 exited with code 3.", {"boom"});
  REQUIRE(write_failure_file(dir.paths(), text) == FailureFile::written);  // creates output/ as needed
  REQUIRE(read_file(dir.paths().failure_file()) == text);
  REQUIRE(dir.output_entries() == std::vector<std::string>{"failure"});
}

TEST_CASE("failure file: one that already exists is never overwritten", "[report]") {
  ReportDir dir;
  const std::string users_reason = "My training script found a corrupt shard: s3://bucket/part-7\n";
  write_file(dir.paths().failure_file(), users_reason);
  CHECK(write_failure_file(dir.paths(), "Rank 0 of 1 on host algo-1 exited with code 1.\n") == FailureFile::jobs_own_kept);
  REQUIRE(read_file(dir.paths().failure_file()) == users_reason);
  REQUIRE(dir.output_entries() == std::vector<std::string>{"failure"});  // no temporary left behind

  // Nor a second report of train's own: the first one stands.
  ReportDir second;
  REQUIRE(write_failure_file(second.paths(), "First.\n") == FailureFile::written);
  CHECK(write_failure_file(second.paths(), "Second.\n") == FailureFile::jobs_own_kept);
  REQUIRE(read_file(second.paths().failure_file()) == "First.\n");
  REQUIRE(second.output_entries() == std::vector<std::string>{"failure"});
}

TEST_CASE("failure file: an empty existing file counts as existing", "[report]") {
  ReportDir dir;
  write_file(dir.paths().failure_file(), "");
  CHECK(write_failure_file(dir.paths(), "Ours.\n") == FailureFile::jobs_own_kept);
  REQUIRE(read_file(dir.paths().failure_file()).empty());
}

TEST_CASE("success file: written empty, with no temporary file left", "[report]") {
  ReportDir dir;
  REQUIRE(write_success_file(dir.paths()));
  REQUIRE(std::filesystem::is_regular_file(dir.paths().success_file()));
  REQUIRE(std::filesystem::file_size(dir.paths().success_file()) == 0);
  REQUIRE(dir.output_entries() == std::vector<std::string>{"success"});
}

TEST_CASE("failure file: a symbolic link that leads to no file is replaced, never followed", "[report]") {
  ReportDir dir;
  std::filesystem::create_directories(dir.paths().output());
  std::filesystem::create_directory_symlink(dir.path() / "nowhere", dir.paths().failure_file());
  REQUIRE(write_failure_file(dir.paths(), "Ours.\n") == FailureFile::written);
  CHECK_FALSE(std::filesystem::is_symlink(dir.paths().failure_file()));
  CHECK(read_file(dir.paths().failure_file()) == "Ours.\n");
  CHECK_FALSE(std::filesystem::exists(dir.path() / "nowhere"));
  // A link to the job's own file is the job's reason: kept.
  ReportDir linked;
  write_file(linked.path() / "reason", "the job's reason\n");
  std::filesystem::create_directories(linked.paths().output());
  std::filesystem::create_symlink(linked.path() / "reason", linked.paths().failure_file());
  CHECK(write_failure_file(linked.paths(), "Ours.\n") == FailureFile::jobs_own_kept);
  CHECK(read_file(linked.path() / "reason") == "the job's reason\n");
}

TEST_CASE("failure file: a folder in its place is never taken for a reason", "[report]") {
  ReportDir dir;
  std::filesystem::create_directories(dir.paths().failure_file());
  CHECK(write_failure_file(dir.paths(), "Ours.\n") == FailureFile::not_written);
  CHECK(report_failure(dir.paths(), "Rank 0 of 1 on host algo-1 exited with code 3.", {}, 3) == 74);
  CHECK(dir.output_entries() == std::vector<std::string>{"failure"});  // no temporary left behind
  ReportDir good;
  CHECK(report_failure(good.paths(), "Rank 0 of 1 on host algo-1 exited with code 3.", {}, 3) == 3);
}

TEST_CASE("job report start: whatever is at output/failure is moved aside, to a free name if need be", "[report]") {
  SECTION("a folder") {
    ReportDir dir;
    write_file(dir.paths().failure_file() / "note", "old\n");
    start_job_report(dir.paths());
    CHECK(read_file(dir.paths().output() / "failure.previous" / "note") == "old\n");
    CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(dir.paths().failure_file())));
  }
  SECTION("a dangling link") {
    ReportDir dir;
    std::filesystem::create_directories(dir.paths().output());
    std::filesystem::create_symlink(dir.path() / "nowhere", dir.paths().failure_file());
    start_job_report(dir.paths());
    CHECK(std::filesystem::read_symlink(dir.paths().output() / "failure.previous") == dir.path() / "nowhere");
    CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(dir.paths().failure_file())));
  }
  SECTION("a file, with an earlier failure.previous file (replaced, as before) or folder (kept)") {
    ReportDir dir;
    write_file(dir.paths().failure_file(), "newer\n");
    write_file(dir.paths().output() / "failure.previous", "older\n");
    start_job_report(dir.paths());
    CHECK(read_file(dir.paths().output() / "failure.previous") == "newer\n");
    ReportDir beside;
    write_file(beside.paths().failure_file(), "newer\n");
    write_file(beside.paths().output() / "failure.previous" / "kept", "older\n");
    write_file(beside.paths().output() / "failure.previous.1", "taken\n");
    start_job_report(beside.paths());
    CHECK(read_file(beside.paths().output() / "failure.previous" / "kept") == "older\n");
    CHECK(read_file(beside.paths().output() / "failure.previous.1") == "taken\n");
    CHECK(read_file(beside.paths().output() / "failure.previous.2") == "newer\n");
  }
}
