#include "common/atomic_file.h"
#include "runtime/model_io/safetensors.h"

#include "tests/unit/test_model_io_support.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>

using namespace train;
using model_io_test::read_bytes;
using model_io_test::ScratchDir;

TEST_CASE("atomic file: writes the content and leaves no temporary file", "[model_io]") {
  ScratchDir dir;
  const std::string path = dir.file("model.json");
  write_file_atomically(path, "{\"a\": 1}\n");
  CHECK(read_bytes(path) == "{\"a\": 1}\n");
  CHECK(dir.entries() == std::set<std::string>{"model.json"});
  struct stat status {};
  REQUIRE(::stat(path.c_str(), &status) == 0);
  CHECK((status.st_mode & 0777) == 0644);
}

TEST_CASE("atomic file: an existing file is replaced only when the new one is complete", "[model_io]") {
  ScratchDir dir;
  const std::string path = dir.file("checkpoint");
  write_file_atomically(path, "old");
  {
    AtomicFile file(path);
    file.write("new, first half; ");
    // While the new file is being written, the old one is whole under the name, the new one elsewhere.
    CHECK(read_bytes(path) == "old");
    CHECK(dir.entries().size() == 2);
    CHECK(read_bytes(file.temporary_path()) == "new, first half; ");
    CHECK(file.temporary_path().rfind(path + ".tmp-", 0) == 0);
    file.write("second half");
    file.commit();
    CHECK(read_bytes(path) == "new, first half; second half");
  }
  CHECK(dir.entries() == std::set<std::string>{"checkpoint"});
}

TEST_CASE("atomic file: an abandoned write leaves the old file and nothing else", "[model_io]") {
  ScratchDir dir;
  const std::string path = dir.file("model.safetensors");
  write_file_atomically(path, "old");
  try {
    AtomicFile file(path);
    file.write("half of a new file");
    throw std::runtime_error("killed mid-write");
  } catch (const std::runtime_error&) {
  }
  CHECK(read_bytes(path) == "old");
  CHECK(dir.entries() == std::set<std::string>{"model.safetensors"});

  // A safetensors write that fails validation after start does not touch the old file either.
  float value = 1.0f;
  CHECK_THROWS(model_io::write_safetensors(
      path, {{"a", model_io::Dtype::F32, {}, &value}, {"a", model_io::Dtype::F32, {}, &value}}));
  CHECK(read_bytes(path) == "old");
  CHECK(dir.entries() == std::set<std::string>{"model.safetensors"});
}

TEST_CASE("atomic file: errors name the file", "[model_io]") {
  ScratchDir dir;
  const std::string path = dir.file("no/such/dir/model.json");
  try {
    write_file_atomically(path, "x");
    FAIL("no error");
  } catch (const std::runtime_error& error) {
    CHECK(std::string(error.what()) == "cannot create " + path + ".tmp-XXXXXX: No such file or directory");
  }
  CHECK_THROWS_WITH(sync_directory(dir.file("absent")),
                    "cannot open the directory " + dir.file("absent") + ": No such file or directory");
}

TEST_CASE("atomic file: stale temporaries of an interrupted writer are removed, nothing else", "[model_io]") {
  ScratchDir dir;
  const std::string path = dir.file("checkpoint.safetensors");
  for (std::string name : {"checkpoint.safetensors.tmp-abc123", "checkpoint.safetensors.tmp-ZZZZZZ",
                           "checkpoint.safetensors", "checkpoint.safetensors.tmp-keep.txt", "other.tmp-abc123",
                           "model.json", "checkpoint.safetensors.tmp-a.b-cd"}) {
    model_io_test::write_bytes(dir.file(name), "x");
  }
  CHECK(remove_stale_temporaries(path) == 2);
  CHECK(dir.entries() == std::set<std::string>{"checkpoint.safetensors", "checkpoint.safetensors.tmp-keep.txt",
                                               "other.tmp-abc123", "model.json",
                                               "checkpoint.safetensors.tmp-a.b-cd"});
  CHECK(remove_stale_temporaries(dir.file("absent/x")) == 0);
}
