#include "runtime/data/data_error.h"
#include "runtime/data/sources/image_folder.h"
#include "tests/unit/test_data_helpers.h"

#include <catch2/catch.hpp>

#include <fstream>

using namespace train::data;
using train::data::testing::TempDir;

namespace {

void touch(const std::string& path, const std::string& content = "x") { std::ofstream(path) << content; }

}  // namespace

TEST_CASE("image folder: classes are the sorted subfolder names, files in torchvision's order", "[data]") {
  TempDir dir;
  // Created out of order; "B" sorts before "a" (byte order, as Python's sorted()).
  for (const char* name : {"zebra", "a", "B", "m/sub"}) dir.mkdir(std::string("root/") + name);
  touch(dir / "root/zebra/2.JPG");
  touch(dir / "root/zebra/10.jpeg");
  touch(dir / "root/a/x.png");
  touch(dir / "root/a/readme.txt");     // not an image: ignored
  touch(dir / "root/a/.hidden.jpg");    // hidden: ignored
  touch(dir / "root/B/b.jpg");
  touch(dir / "root/m/z.png");
  touch(dir / "root/m/sub/a.png");      // nested: found, after m/z.png (sorted(os.walk) order)
  touch(dir / "root/stray.jpg");        // not in a class folder: ignored
  dir.mkdir("root/.ipynb_checkpoints");  // hidden folder: not a class

  const auto folder = scan_image_folder(dir / "root");
  REQUIRE(folder.classes == std::vector<std::string>{"B", "a", "m", "zebra"});
  const std::string root = dir / "root";
  REQUIRE(folder.paths == std::vector<std::string>{root + "/B/b.jpg", root + "/a/x.png", root + "/m/z.png",
                                                   root + "/m/sub/a.png", root + "/zebra/10.jpeg",
                                                   root + "/zebra/2.JPG"});
  CHECK(folder.labels == std::vector<int32_t>{0, 1, 2, 2, 3, 3});
  CHECK(folder.size() == 6);
}

TEST_CASE("image folder: file names taken", "[data]") {
  for (const char* name : {"a.jpg", "a.JPEG", "a.Png"}) {
    INFO(name);
    CHECK(is_image_file_name(name));
  }
  for (const char* name : {"a.gif", "jpg", "a.jpg.txt"}) {
    INFO(name);
    CHECK_FALSE(is_image_file_name(name));
  }
}

TEST_CASE("image folder: clear errors naming the path", "[data]") {
  TempDir dir;
  SECTION("missing") {
    const std::string path = dir / "nothing-here";
    REQUIRE_THROWS_WITH(scan_image_folder(path), Catch::Contains(path) && Catch::Contains("does not exist"));
  }
  SECTION("a file, not a folder") {
    touch(dir / "file");
    REQUIRE_THROWS_WITH(scan_image_folder(dir / "file"), Catch::Contains("is not a folder"));
  }
  SECTION("empty folder") {
    const std::string path = dir.mkdir("empty");
    REQUIRE_THROWS_AS(scan_image_folder(path), DataError);
    REQUIRE_THROWS_WITH(scan_image_folder(path),
                        Catch::Contains(path) && Catch::Contains("no class subfolders") &&
                            Catch::Contains("one subfolder per class"));
  }
  SECTION("images but no class subfolders") {
    const std::string path = dir.mkdir("flat");
    touch(path + "/1.jpg");
    touch(path + "/2.jpg");
    REQUIRE_THROWS_WITH(scan_image_folder(path),
                        Catch::Contains("no class subfolders") && Catch::Contains("2 image files lie directly in it"));
  }
  SECTION("a class without images") {
    dir.mkdir("root/cat");
    dir.mkdir("root/dog");
    touch(dir / "root/cat/1.jpg");
    touch(dir / "root/dog/notes.txt");
    REQUIRE_THROWS_WITH(scan_image_folder(dir / "root"),
                        Catch::Contains(dir / "root") && Catch::Contains("class subfolder dog;"));
  }
}

TEST_CASE("image folder: symbolic links are followed, loops and dead links reported", "[data]") {
  TempDir dir;
  dir.mkdir("root/cat/more");
  dir.mkdir("root/dog");
  dir.mkdir("elsewhere");
  touch(dir / "root/cat/1.jpg");
  touch(dir / "root/cat/more/2.jpg");
  touch(dir / "root/dog/3.jpg");
  touch(dir / "elsewhere/4.jpg");
  // A link to a folder outside is followed, as os.walk(followlinks=True) does.
  std::filesystem::create_directory_symlink(dir / "elsewhere", dir / "root/dog/linked");
  ImageFolder folder = scan_image_folder(dir / "root");
  CHECK(folder.paths == std::vector<std::string>{dir / "root/cat/1.jpg", dir / "root/cat/more/2.jpg",
                                                 dir / "root/dog/3.jpg", dir / "root/dog/linked/4.jpg"});

  SECTION("a link back to a folder above: a loop, named, not a class repeated until the path is too long") {
    std::filesystem::create_directory_symlink(dir / "root/cat", dir / "root/cat/more/again");
    REQUIRE_THROWS_AS(scan_image_folder(dir / "root"), DataError);
    REQUIRE_THROWS_WITH(scan_image_folder(dir / "root"),
                        "image folder: " + dir / "root/cat/more/again" + " leads back to " + dir / "root/cat" +
                            " (a symbolic link loop), so its images would be counted again and again; remove or "
                            "fix that link");
  }
  SECTION("a link to itself") {
    std::filesystem::create_symlink(dir / "root/dog/self", dir / "root/dog/self");
    REQUIRE_THROWS_WITH(scan_image_folder(dir / "root"),
                        Catch::StartsWith("image folder: cannot follow " + dir / "root/dog/self" + ": ") &&
                            Catch::Contains("remove or fix that link"));
  }
  SECTION("an image that is a link to nothing") {
    std::filesystem::create_symlink(dir / "gone.jpg", dir / "root/dog/5.jpg");
    REQUIRE_THROWS_WITH(scan_image_folder(dir / "root"),
                        Catch::StartsWith("image folder: cannot follow " + dir / "root/dog/5.jpg" + ": "));
  }
}
