// An image folder's index as it travels between ranks: bytes back to the same folder, refused when they are not
// what was written, moved to the receiving host's root; renumbered to the job's classes; and what it costs in memory.
#include "runtime/data/data_error.h"
#include "runtime/data/sources/data_channel.h"
#include "runtime/data/sources/image_folder.h"
#include "tests/unit/test_data_helpers.h"

#include <catch2/catch.hpp>

#include <fstream>

using namespace train::data;
using train::data::testing::TempDir;

namespace {

ImageFolder scanned_folder(TempDir& dir) {
  for (const char* name : {"root/cat/more", "root/dog"}) dir.mkdir(name);
  for (const char* name : {"root/cat/1.jpg", "root/cat/more/2.png", "root/dog/3.JPEG"}) std::ofstream(dir / name) << "x";
  return scan_image_folder(dir / "root");
}

}  // namespace

TEST_CASE("image folder index: serialized and parsed back, the same folder", "[data]") {
  TempDir dir;
  const ImageFolder folder = scanned_folder(dir);
  const ImageFolder back = parse_image_folder(serialize_image_folder(folder));
  CHECK(back.kind == folder.kind);
  CHECK(back.root == folder.root);
  CHECK(back.classes == folder.classes);
  CHECK(back.paths == folder.paths);
  CHECK(back.labels == folder.labels);
  CHECK(back.labels == std::vector<int32_t>{0, 0, 1});
}

TEST_CASE("image folder index: bytes it did not write are refused", "[data]") {
  TempDir dir;
  const std::string bytes = serialize_image_folder(scanned_folder(dir));
  CHECK_THROWS_AS(parse_image_folder("not an index"), DataError);
  CHECK_THROWS_WITH(parse_image_folder(bytes.substr(0, bytes.size() - 3)), Catch::Contains("cut short"));
  CHECK_THROWS_WITH(parse_image_folder(bytes + "x"), Catch::Contains("bytes after its end"));
  std::string bad_label = bytes;
  bad_label[bad_label.size() - 4] = 7;  // the last label: class 7 of 2
  CHECK_THROWS_WITH(parse_image_folder(bad_label), Catch::Contains("a label outside its 2 classes"));
}

TEST_CASE("image folder index: moved to another root, every path below it follows", "[data]") {
  TempDir dir;
  const ImageFolder folder = scanned_folder(dir);
  const ImageFolder moved = rooted_at(folder, "/mnt/elsewhere/");
  CHECK(moved.root == "/mnt/elsewhere/");
  CHECK(moved.paths == std::vector<std::string>{"/mnt/elsewhere/cat/1.jpg", "/mnt/elsewhere/cat/more/2.png",
                                                "/mnt/elsewhere/dog/3.JPEG"});
  CHECK(rooted_at(folder, folder.root).paths == folder.paths);
}

TEST_CASE("image folder index: its bytes count every path's buffer", "[data]") {
  TempDir dir;
  ImageFolder folder = scanned_folder(dir);
  const int64_t before = folder.bytes();
  CHECK(before > static_cast<int64_t>(sizeof(ImageFolder)));
  folder.paths.push_back(std::string(1000, 'p'));
  folder.labels.push_back(0);
  CHECK(folder.bytes() >= before + 1000);
}

TEST_CASE("image folder index: renumbered to the job's classes by name", "[data]") {
  TempDir dir;
  ImageFolder folder = scanned_folder(dir);  // cat (0): 2 images, dog (1): 1
  REQUIRE(folder.labels == std::vector<int32_t>{0, 0, 1});
  const std::vector<std::string> job{"ant", "cat", "cow", "dog"};  // another host's classes among them
  CHECK_FALSE(renumber_classes(folder, job));
  CHECK(folder.classes == job);
  CHECK(folder.labels == std::vector<int32_t>{1, 1, 3});
}

TEST_CASE("image folder index: a class missing from the job's is named, the folder unchanged", "[data]") {
  TempDir dir;
  ImageFolder folder = scanned_folder(dir);
  const ImageFolder before = folder;
  CHECK(renumber_classes(folder, {"ant", "cat"}) == std::optional<std::string>("dog"));
  CHECK(folder.classes == before.classes);
  CHECK(folder.labels == before.labels);
}
