// The byte sources under the record readers: a buffered file read with skips and seeks in any mix gives
// the file's bytes; gzip streams inflate (several members too) and report damage with an offset; CRC-32C
// matches its published check value.
#include "runtime/data/data_error.h"
#include "runtime/data/records/byte_stream.h"
#include "runtime/data/records/crc32c.h"
#include "tests/unit/test_data_record_writers.h"

#include <catch2/catch.hpp>

using namespace train::data;
using namespace train::data::testing;

TEST_CASE("CRC-32C: the standard check value and TensorFlow's mask", "[data]") {
  const std::string text = "123456789";
  CHECK(crc32c(reinterpret_cast<const uint8_t*>(text.data()), text.size()) == 0xe3069283u);
  CHECK(crc32c(nullptr, 0) == 0);
  CHECK(mask_crc32c(0) == 0xa282ead8u);
  // Continuing a checksum equals checksumming the whole.
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  CHECK(crc32c(bytes + 4, 5, crc32c(bytes, 4)) == 0xe3069283u);
}

TEST_CASE("CRC-32C: the CPU's instruction and the tables agree on every length and alignment", "[data]") {
  const std::string text = "123456789";
  CHECK(crc32c_portable(reinterpret_cast<const uint8_t*>(text.data()), text.size()) == 0xe3069283u);
  Bytes data(1100);
  Rng rng(9);
  for (auto& byte : data) byte = static_cast<uint8_t>(rng.next());
  for (size_t start = 0; start < 9; ++start) {
    for (size_t size = 0; size + start <= data.size(); size += 1 + size / 7) {
      INFO("start " << start << ", size " << size);
      const uint32_t seed = static_cast<uint32_t>(rng.next());
      REQUIRE(crc32c(data.data() + start, size, seed) == crc32c_portable(data.data() + start, size, seed));
    }
  }
}

TEST_CASE("file stream: reads, skips and seeks in any mix give the file's bytes", "[data]") {
  TempDir dir;
  Bytes content(3 << 20);
  Rng rng(5);
  for (auto& byte : content) byte = static_cast<uint8_t>(rng.next());
  write_bytes(dir.path() / "f.bin", content);
  FileStream stream(dir / "f.bin");
  REQUIRE(stream.size() == content.size());
  uint64_t position = 0;
  Bytes buffer;
  for (int step = 0; step < 3000; ++step) {
    const uint64_t choice = rng.below(10);
    const uint64_t amount = rng.below(choice < 2 ? (2 << 20) : 70000);
    if (choice < 4) {
      buffer.resize(static_cast<size_t>(amount));
      const size_t got = stream.read_fully(buffer.data(), buffer.size());
      REQUIRE(got == std::min<uint64_t>(amount, content.size() - position));
      REQUIRE(std::equal(buffer.begin(), buffer.begin() + static_cast<long>(got), content.begin() + static_cast<long>(position)));
      position += got;
    } else if (choice < 7) {
      position += stream.skip(amount);
    } else {
      position = rng.below(content.size() + 1);
      stream.seek(position);
    }
    REQUIRE(stream.offset() == std::min<uint64_t>(position, content.size()));
    position = stream.offset();
  }
}

TEST_CASE("gzip stream: several members inflate as one, damage and truncation are reported", "[data]") {
  const Bytes first{'a', 'b', 'c'}, second{'d', 'e'};
  Bytes both = gzip(first);
  append(both, gzip(second));
  GzipStream stream(std::make_unique<MemoryStream>(both.data(), both.size(), "two.gz"));
  Bytes out(10);
  CHECK(stream.read_fully(out.data(), out.size()) == 5);
  CHECK(Bytes(out.begin(), out.begin() + 5) == Bytes{'a', 'b', 'c', 'd', 'e'});

  Bytes damaged = gzip(Bytes(1000, 'x'));
  damaged[12] ^= 0xff;
  GzipStream bad(std::make_unique<MemoryStream>(damaged.data(), damaged.size(), "bad.gz"));
  Bytes sink(2000);
  CHECK_THROWS_AS(bad.read_fully(sink.data(), sink.size()), CorruptDataError);

  const Bytes whole = gzip(Bytes(1000, 'y'));
  const Bytes cut(whole.begin(), whole.end() - 3);
  GzipStream truncated(std::make_unique<MemoryStream>(cut.data(), cut.size(), "cut.gz"));
  CHECK(truncated.read_fully(sink.data(), 1000) == 1000);  // the data is all there ...
  CHECK_THROWS_WITH(truncated.read_fully(sink.data(), 1), Catch::Contains("cut.gz") && Catch::Contains("truncated"));
}
