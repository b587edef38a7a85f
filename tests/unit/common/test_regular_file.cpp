// Files that must be regular ones (config files, checkpoints, images, record files, .lst lines): whatever else
// stands in their place is refused before a byte is read, and a FIFO without a writer is refused at once.
#include "common/regular_file.h"
#include "runtime/data/data_error.h"
#include "runtime/data/images/image_decode.h"
#include "runtime/data/sources/data_channel.h"
#include "tests/unit/test_data_record_writers.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

using namespace train;
using namespace train::data;
using namespace train::data::testing;

namespace {

// A Unix socket bound at `path` (the file stays while `fd` is open).
int bind_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof address.sun_path);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  return fd;
}

}  // namespace

TEST_CASE("regular files: a FIFO, a device, a socket or a folder is refused without reading", "[regular_file]") {
  TempDir dir;
  const std::string fifo = dir / "fifo", zero = dir / "zero", folder = dir.mkdir("folder"), socket = dir / "socket";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // no writer: a blocking open would wait forever
  std::filesystem::create_symlink("/dev/zero", zero);
  const int socket_fd = bind_socket(socket);
  CHECK(open_regular_file(fifo).problem() == "not a regular file but a FIFO (named pipe)");
  CHECK(open_regular_file(zero).problem() == "not a regular file but a character device");
  CHECK(open_regular_file(folder).problem() == "not a regular file but a directory");
  CHECK(open_regular_file(socket).problem() == "not a regular file but a socket");
  CHECK(open_regular_file(dir / "missing").problem() == "cannot open: No such file or directory");
  ::close(socket_fd);

  write_bytes(std::filesystem::path(dir / "file"), Bytes{1, 2, 3});
  std::filesystem::create_symlink(dir / "file", dir / "link");
  RegularFile file = open_regular_file(dir / "link");  // a link to a regular file is one
  REQUIRE(file.ok());
  CHECK(file.size == 3);
  CHECK((::fcntl(file.fd, F_GETFL) & O_NONBLOCK) == 0);
  CHECK((::fcntl(file.fd, F_GETFD) & FD_CLOEXEC) != 0);
  ::close(file.fd);

  // An image is read through it: /dev/zero in an image's place is refused, not read until memory runs out.
  std::vector<uint8_t> bytes;
  CHECK_THROWS_WITH(read_file(zero, bytes), zero + ": not a regular file but a character device");
  CHECK_THROWS_WITH(read_file(fifo, bytes), fifo + ": not a regular file but a FIFO (named pipe)");
}

TEST_CASE("image lists: a line naming a device, a FIFO or a folder is refused with its line", "[regular_file]") {
  TempDir dir;
  const std::string images = dir.mkdir("images/a");
  write_bytes(std::filesystem::path(images) / "x.jpg",
              encode_jpeg(test_pixels(16, 12, 3, 1).data(), 16, 12, 3));
  std::filesystem::create_symlink("/dev/zero", std::filesystem::path(images) / "zero.jpg");
  REQUIRE(::mkfifo((std::filesystem::path(images) / "fifo.jpg").c_str(), 0600) == 0);
  std::filesystem::create_directories(std::filesystem::path(images) / "folder.jpg");
  const std::string lists = dir.mkdir("lists");
  const std::string text = "0\t0\ta/x.jpg\n1\t1\ta/zero.jpg\n2\t1\ta/fifo.jpg\n3\t1\ta/folder.jpg\n4\t1\ta/x.jpg\n";
  write_bytes(std::filesystem::path(lists) / "train.lst", Bytes(text.begin(), text.end()));
  DataOptions options;
  options.image.height = options.image.width = 8;
  CHECK_THROWS_WITH(open_channel(dir / "images", lists, DataFormat::detect, options),
                    Catch::Contains("train.lst, byte offset 12: the image path \"a/zero.jpg\" names a character device, "
                                    "not a regular file"));
  // With skip_corrupt the three lines are left out, as image folders leave such entries out.
  options.skip_corrupt = true;
  const auto opened = open_channel(dir / "images", lists, DataFormat::detect, options);
  CHECK(opened.source->size() == 2);
  CHECK(opened.corrupt_at_open == 3);
  REQUIRE(opened.corrupt_notes.size() == 3);
  CHECK_THAT(opened.corrupt_notes[1], Catch::Contains("\"a/fifo.jpg\" names a FIFO (named pipe)"));
  CHECK_THAT(opened.corrupt_notes[2], Catch::Contains("\"a/folder.jpg\" names a directory"));
}
