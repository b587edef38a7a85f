#include "job/rank_reason.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

using namespace train;

TEST_CASE("rank reasons: what a failing rank leaves is read back whole, earliest first", "[rank_reason]") {
  RankReasonFolder folder;
  const auto environment = folder.export_to({{"OTHER", "1"}});
  CHECK(environment.at(rank_reasons_variable) == folder.path().string());
  CHECK(environment.at("OTHER") == "1");
  CHECK(read_rank_reasons(folder.path()).empty());

  ::setenv(rank_reasons_variable, folder.path().c_str(), 1);
  write_rank_reason(3, 65, 0, "the training data in /data has a single class\nsecond line");
  write_rank_reason(1, 0, 9, "");
  ::unsetenv(rank_reasons_variable);
  write_rank_reason(2, 70, 0, "not written: no folder named");
  std::ofstream(folder.path() / "rank-4.tmp-AbCdEf") << "half a reason";  // a rank killed while writing
  std::ofstream(folder.path() / "rank-5") << "not a reason";

  const auto reasons = read_rank_reasons(folder.path());
  REQUIRE(reasons.size() == 2);
  CHECK(reasons[0].rank == 3);
  CHECK(reasons[0].exit_code == 65);
  CHECK(reasons[0].signal == 0);
  CHECK(reasons[0].lines == std::vector<std::string>{"the training data in /data has a single class", "second line"});
  CHECK(reasons[1].rank == 1);
  CHECK(reasons[1].signal == 9);
  CHECK(reasons[1].lines.empty());
  CHECK(reasons[0].written_ns <= reasons[1].written_ns);
  CHECK(reasons[0].kind == RankReasonKind::rank);
}

TEST_CASE("rank reasons: a sentence about the whole job is read back as the report's headline", "[rank_reason]") {
  RankReasonFolder folder;
  ::setenv(rank_reasons_variable, folder.path().c_str(), 1);
  write_rank_reason(0, 65, 0, "Host algo-2's job description differs\nmore", RankReasonKind::headline);
  ::unsetenv(rank_reasons_variable);
  const auto reasons = read_rank_reasons(folder.path());
  REQUIRE(reasons.size() == 1);
  CHECK(reasons[0].kind == RankReasonKind::headline);
  CHECK(reasons[0].lines == std::vector<std::string>{"Host algo-2's job description differs", "more"});
}

TEST_CASE("rank reasons: the folder goes with everything in it", "[rank_reason]") {
  std::filesystem::path path;
  {
    RankReasonFolder folder;
    path = folder.path();
    std::ofstream(path / "rank-0") << "x";
  }
  CHECK_FALSE(std::filesystem::exists(path));
}
