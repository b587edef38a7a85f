// Every file train makes: created new (a file or symbolic link planted under its name in a shared folder such
// as /dev/shm is never followed, truncated or reused) and with the permissions the process's umask allows.
#include "common/atomic_file.h"
#include "common/paths.h"
#include "entrypoint/job_report.h"
#include "job/rank_mark.h"
#include "runtime/model_io/safetensors.h"
#include "tests/unit/test_model_io_support.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

using namespace train;
using model_io_test::read_bytes;
using model_io_test::ScratchDir;

namespace {

mode_t mode_of(const std::string& path) {
  struct stat status {};
  REQUIRE(::stat(path.c_str(), &status) == 0);
  return status.st_mode & 07777;
}

// Sets the umask for the life of the object (the process's: the tests run one at a time).
class Umask {
 public:
  explicit Umask(mode_t mask) : previous_(::umask(mask)) {}
  ~Umask() { ::umask(previous_); }
  Umask(const Umask&) = delete;
  Umask& operator=(const Umask&) = delete;

 private:
  mode_t previous_;
};

}  // namespace

TEST_CASE("created files: the model, checkpoint and report files honour the umask", "[created_files]") {
  ScratchDir dir;
  const JobPaths paths{.base = dir.path()};
  float value = 1.0f;
  for (const mode_t mask : {mode_t{077}, mode_t{022}, mode_t{002}}) {
    INFO("umask " << std::oct << mask);
    Umask umask(mask);
    const mode_t expected = 0666 & ~mask;
    const std::string metrics = dir.file("metrics.json"), model = dir.file("model.safetensors");
    write_file_atomically(metrics, "{}\n");  // metrics.json, model.json
    model_io::write_safetensors(model, {{"a", model_io::Dtype::F32, {}, &value}});  // model and checkpoints
    REQUIRE(write_success_file(paths));
    REQUIRE(write_failure_file(paths, "Why.\n") == FailureFile::written);
    CHECK(mode_of(metrics) == expected);
    CHECK(mode_of(model) == expected);
    CHECK(mode_of(paths.success_file().string()) == expected);
    CHECK(mode_of(paths.failure_file().string()) == expected);
    std::filesystem::remove(paths.failure_file());
  }
}

TEST_CASE("created files: a planted symbolic link is never followed", "[created_files]") {
  ScratchDir dir;
  const std::string target = dir.file("target"), link = dir.file("link");
  std::filesystem::create_symlink(target, link);
  CHECK(create_new_file(link) == -1);
  CHECK(errno == EEXIST);
  CHECK(open_file_for_appending(link) == -1);  // TensorBoard's events, TRAIN_SAMPLE_LOG's lines
  CHECK(errno == ELOOP);
  CHECK_FALSE(std::filesystem::exists(target));

  // An atomic file renames over the link itself; the link's target is never written.
  write_file_atomically(link, "ours");
  CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(link)));
  CHECK(read_bytes(link) == "ours");
  CHECK_FALSE(std::filesystem::exists(target));
}

TEST_CASE("created files: the ranks' mark in /dev/shm is never made through a planted link", "[created_files]") {
  // A root rank opened /dev/shm/train-ranks-started with O_CREAT alone: a link planted there made it create
  // (as root) whatever file the link named.
  ScratchDir dir;
  const std::filesystem::path mark = dir.file("train-ranks-started"), target = dir.file("planted-target");
  std::filesystem::create_symlink(target, mark);
  CHECK_FALSE(ranks_have_started(mark));  // a link is not the mark
  mark_rank_started(mark);
  CHECK_FALSE(std::filesystem::exists(target));
  CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(mark)));  // the link gave way to the mark
  CHECK(ranks_have_started(mark));
  mark_rank_started(mark);  // a second rank finds the mark made
  CHECK(ranks_have_started(mark));
  clear_rank_mark(mark);
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(mark)));

  // A link to a file that exists: neither followed nor truncated.
  write_file_atomically(target.string(), "precious");
  std::filesystem::create_symlink(target, mark);
  mark_rank_started(mark);
  CHECK(read_bytes(target.string()) == "precious");
  CHECK(ranks_have_started(mark));
}
