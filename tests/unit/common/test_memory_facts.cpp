// What out-of-memory reports say: the host's memory and a process's own peak.
#include "common/memory_facts.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

using namespace train;

TEST_CASE("memory facts: sizes in words, the host's memory, this process's peak", "[launch]") {
  CHECK(memory_text(512ull << 20) == "512 MiB");
  CHECK(memory_text(7ull << 29) == "3.5 GiB");
  const auto host = host_memory_bytes();
  REQUIRE(host);
  CHECK(*host > (64ull << 20));
  CHECK_THAT(host_memory_text(), Catch::StartsWith("this host has " + memory_text(*host) + " of memory"));
  const uint64_t before = own_peak_memory_bytes();
  std::vector<char> touched(96ull << 20);
  std::memset(touched.data(), 1, touched.size());
  CHECK(own_peak_memory_bytes() >= before);
  CHECK(own_peak_memory_bytes() >= touched.size());
}
