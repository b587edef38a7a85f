// The demultiplexer of mpirun's --tag-output stream: every emitted line is whole and belongs to one rank,
// however mpirun cut and interleaved the chunks.
#include "entrypoint/rank_output_relay.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace train;

namespace {

struct Collected {
  int rank;
  OutputStream stream;
  std::string text;
  bool operator==(const Collected& other) const {
    return rank == other.rank && stream == other.stream && text == other.text;
  }
};

std::ostream& operator<<(std::ostream& out, const Collected& line) {
  return out << "{rank " << line.rank << ", " << (line.stream == OutputStream::out ? "out" : "err") << ", \""
             << line.text << "\"}";
}

// A demux whose sink records every line.
struct Recorder {
  std::vector<Collected> lines;
  TaggedOutputDemux demux{[this](const RankLine& line) { lines.push_back({line.rank, line.stream, line.text}); }};

  // Feeds `bytes` one slice at a time, cut at every offset in `cuts`.
  void feed_in_pieces(OutputStream source, const std::string& bytes, std::vector<size_t> cuts) {
    size_t start = 0;
    cuts.push_back(bytes.size());
    for (size_t cut : cuts) {
      demux.feed(source, std::string_view(bytes).substr(start, cut - start));
      start = cut;
    }
  }
};

std::string tag(int rank, const char* stream = "stdout") {
  return "[1," + std::to_string(rank) + "]<" + stream + ">:";
}

}  // namespace

TEST_CASE("relay: whole tagged lines come out as they went in", "[relay]") {
  Recorder r;
  r.demux.feed(OutputStream::out, tag(0) + "hello\n" + tag(3) + "world\n");
  REQUIRE(r.lines == std::vector<Collected>{{0, OutputStream::out, "hello"}, {3, OutputStream::out, "world"}});
}

TEST_CASE("relay: a line cut mid-way waits for the rest of it", "[relay]") {
  Recorder r;
  r.demux.feed(OutputStream::out, tag(2) + "first ha");
  CHECK(r.lines.empty());
  // mpirun starts the next chunk of the same rank with the tag again.
  r.demux.feed(OutputStream::out, tag(2) + "lf, second half\n");
  REQUIRE(r.lines == std::vector<Collected>{{2, OutputStream::out, "first half, second half"}});
}

TEST_CASE("relay: a chunk cut inside the text, without a new tag, continues the line", "[relay]") {
  Recorder r;
  r.demux.feed(OutputStream::out, tag(1) + "abc");
  r.demux.feed(OutputStream::out, "def\n");
  REQUIRE(r.lines == std::vector<Collected>{{1, OutputStream::out, "abcdef"}});
}

TEST_CASE("relay: interleaved chunks of two ranks never mix in one line", "[relay]") {
  Recorder r;
  // Rank 1's line arrives in two chunks with two of rank 0's lines in between, all in one read.
  r.demux.feed(OutputStream::out, tag(1) + "par" + tag(0) + "zero one\n" + tag(0) + "zero two\n" + tag(1) +
                                      "tial\n");
  REQUIRE(r.lines == std::vector<Collected>{{0, OutputStream::out, "zero one"},
                                            {0, OutputStream::out, "zero two"},
                                            {1, OutputStream::out, "partial"}});
}

TEST_CASE("relay: a tag cut at a chunk boundary is recognised when the rest arrives", "[relay]") {
  const std::string whole = tag(0) + "aaa" + tag(12, "stderr") + "bbb\n" + tag(0) + "ccc\n";
  // Every cut point inside the second tag (and everywhere else): the result must not depend on it.
  for (size_t cut = 1; cut < whole.size(); ++cut) {
    Recorder r;
    r.feed_in_pieces(OutputStream::out, whole, {cut});
    INFO("cut at byte " << cut);
    REQUIRE(r.lines == std::vector<Collected>{{12, OutputStream::err, "bbb"}, {0, OutputStream::out, "aaaccc"}});
  }
}

TEST_CASE("relay: a tag cut at a line start is recognised when the rest arrives", "[relay]") {
  for (size_t cut = 1; cut < tag(7).size(); ++cut) {
    Recorder r;
    r.feed_in_pieces(OutputStream::err, tag(7, "stderr") + "oops\n", {cut});
    INFO("cut at byte " << cut);
    REQUIRE(r.lines == std::vector<Collected>{{7, OutputStream::err, "oops"}});
  }
}

TEST_CASE("relay: mpirun's own untagged lines are rank -1 on the stream they came on", "[relay]") {
  Recorder r;
  r.demux.feed(OutputStream::err,
               "--------------------------------------------------------------------------\n"
               "Primary job  terminated normally, but 1 process returned\n" +
                   tag(1, "stderr") + "boom\n");
  r.demux.feed(OutputStream::out, "[vm:12345] mpirun: Forwarding signal 12 to job\n");
  REQUIRE(r.lines == std::vector<Collected>{
                         {-1, OutputStream::err, "--------------------------------------------------------------------------"},
                         {-1, OutputStream::err, "Primary job  terminated normally, but 1 process returned"},
                         {1, OutputStream::err, "boom"},
                         {-1, OutputStream::out, "[vm:12345] mpirun: Forwarding signal 12 to job"}});
}

TEST_CASE("relay: text that only looks like the start of a tag stays text", "[relay]") {
  Recorder r;
  r.demux.feed(OutputStream::out, tag(0) + "loss [0.5, 1] at [3,4] step [1,2]<x>\n");
  r.demux.feed(OutputStream::out, "[not a tag] from mpirun\n");
  REQUIRE(r.lines == std::vector<Collected>{{0, OutputStream::out, "loss [0.5, 1] at [3,4] step [1,2]<x>"},
                                            {-1, OutputStream::out, "[not a tag] from mpirun"}});
}

TEST_CASE("relay: <stdout>, <stderr> and <stddiag> tags choose the stream, stdout and stderr keep separate lines",
          "[relay]") {
  Recorder r;
  r.demux.feed(OutputStream::out, tag(0) + "out part ");
  r.demux.feed(OutputStream::err, tag(0, "stderr") + "err line\n" + tag(0, "stddiag") + "diag line\n");
  r.demux.feed(OutputStream::out, tag(0) + "end\n");
  REQUIRE(r.lines == std::vector<Collected>{{0, OutputStream::err, "err line"},
                                            {0, OutputStream::err, "diag line"},
                                            {0, OutputStream::out, "out part end"}});
}

TEST_CASE("relay: empty lines and a tag followed by nothing", "[relay]") {
  Recorder r;
  r.demux.feed(OutputStream::out, tag(0) + "\n" + tag(0));
  r.demux.feed(OutputStream::out, tag(0) + "x\n");
  REQUIRE(r.lines == std::vector<Collected>{{0, OutputStream::out, ""}, {0, OutputStream::out, "x"}});
}

TEST_CASE("relay: a very long line comes out in pieces of at most max_line_bytes, cut between characters",
          "[relay]") {
  // ASCII and 2-, 3- and 4-byte UTF-8 characters, so that some cut falls inside a character.
  const std::string alphabet[] = {"a", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "z"};
  std::string body;
  for (size_t i = 0; body.size() < TaggedOutputDemux::max_line_bytes * 3 + 777; ++i) body += alphabet[i % 5];
  Recorder r;
  // As mpirun forwards it: chunks (here of 5000 bytes, cut anywhere), each with the rank's tag.
  for (size_t at = 0; at < body.size(); at += 5000) r.demux.feed(OutputStream::out, tag(5) + body.substr(at, 5000));
  r.demux.feed(OutputStream::out, tag(5) + "\n");
  r.demux.feed(OutputStream::out, tag(6) + "short\n");
  REQUIRE(r.lines.size() == 5);
  std::string joined;
  for (size_t i = 0; i < 4; ++i) {
    const auto& line = r.lines[i];
    CHECK(line.rank == 5);
    CHECK(line.text.size() <= TaggedOutputDemux::max_line_bytes);
    if (i < 3) CHECK(line.text.size() + 3 >= TaggedOutputDemux::max_line_bytes);  // full pieces
    // Each piece starts and ends on a character boundary.
    CHECK((static_cast<unsigned char>(line.text.front()) & 0xC0) != 0x80);
    size_t last_lead = line.text.size() - 1;
    while ((static_cast<unsigned char>(line.text[last_lead]) & 0xC0) == 0x80) --last_lead;
    unsigned char lead = static_cast<unsigned char>(line.text[last_lead]);
    size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    CHECK(last_lead + length == line.text.size());
    joined += line.text;
  }
  REQUIRE(joined == body);
  REQUIRE(r.lines[4] == Collected{6, OutputStream::out, "short"});
}

TEST_CASE("relay: finish() flushes every partial line, tagged or not, and a dangling partial tag", "[relay]") {
  Recorder r;
  r.demux.feed(OutputStream::out, tag(0) + "zero without newline" + tag(1) + "one without newline");
  r.demux.feed(OutputStream::err, "mpirun half line");
  CHECK(r.lines.empty());
  r.demux.finish();
  std::vector<Collected> expected{{-1, OutputStream::err, "mpirun half line"},
                                  {0, OutputStream::out, "zero without newline"},
                                  {1, OutputStream::out, "one without newline"}};
  std::sort(r.lines.begin(), r.lines.end(), [](const Collected& a, const Collected& b) { return a.rank < b.rank; });
  REQUIRE(r.lines == expected);

  Recorder dangling;
  dangling.demux.feed(OutputStream::out, tag(2) + "text [1,");  // looks like the start of a tag: held back
  CHECK(dangling.lines.empty());
  dangling.demux.finish();
  REQUIRE(dangling.lines == std::vector<Collected>{{2, OutputStream::out, "text [1,"}});

  Recorder nothing;
  nothing.demux.finish();
  REQUIRE(nothing.lines.empty());
}

TEST_CASE("relay: any cutting of a four-rank interleaving gives each rank's lines whole and in order", "[relay]") {
  // Four ranks, 50 lines each, each line written by its rank in three pieces; mpirun forwards every
  // piece as a chunk with its tag, in a random interleaving; then the byte stream is read in random slices.
  std::mt19937 random(12345);
  std::map<int, std::vector<std::string>> expected;
  std::vector<std::vector<std::string>> pieces(4);  // per rank, its chunks in order
  for (int rank = 0; rank < 4; ++rank) {
    for (int i = 0; i < 50; ++i) {
      std::string line = "rank" + std::to_string(rank) + " line " + std::to_string(i) + " " +
                         std::string(static_cast<size_t>(random() % 80), static_cast<char>('A' + rank));
      expected[rank].push_back(line);
      size_t a = random() % (line.size() + 1), b = random() % (line.size() + 1);
      if (a > b) std::swap(a, b);
      pieces[rank].push_back(line.substr(0, a));
      pieces[rank].push_back(line.substr(a, b - a));
      pieces[rank].push_back(line.substr(b) + "\n");
    }
  }
  for (int round = 0; round < 20; ++round) {
    std::string stream;
    std::vector<size_t> next(4, 0);
    while (true) {
      std::vector<int> open;
      for (int rank = 0; rank < 4; ++rank) {
        if (next[rank] < pieces[rank].size()) open.push_back(rank);
      }
      if (open.empty()) break;
      int rank = open[random() % open.size()];
      const std::string& chunk = pieces[rank][next[rank]++];
      if (!chunk.empty()) stream += tag(rank) + chunk;
    }
    std::vector<size_t> cuts;
    for (size_t at = random() % 50 + 1; at < stream.size(); at += random() % 200 + 1) cuts.push_back(at);
    Recorder r;
    r.feed_in_pieces(OutputStream::out, stream, cuts);
    r.demux.finish();
    std::map<int, std::vector<std::string>> got;
    for (const auto& line : r.lines) got[line.rank].push_back(line.text);
    INFO("round " << round);
    REQUIRE(got == expected);
  }
}
