#include "runtime/rank_timing.h"

#include "common/config_error.h"
#include "common/train_variables.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/comm/mpi_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace train {

namespace {

constexpr size_t host_name_bytes = 256;  // host names are at most 253 characters

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<long>(middle), values.end());
  double upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  return (upper + *std::max_element(values.begin(), values.begin() + static_cast<long>(middle))) / 2;
}

std::string host_of(const std::vector<std::string>& hosts, size_t rank) {
  return rank < hosts.size() ? hosts[rank] : "?";
}

}  // namespace

StragglerRule straggler_rule_from_environment(const EnvironmentMap& environment) {
  StragglerRule rule;
  rule.factor = read_straggler_factor_variable(environment);
  rule.intervals = static_cast<int>(read_integer_variable(environment, IntegerVariable::straggler_intervals));
  return rule;
}

std::vector<std::string> gather_host_names(const std::string& host, MPI_Comm comm, std::chrono::milliseconds timeout) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<char> mine(host_name_bytes, '\0');
  std::memcpy(mine.data(), host.data(), std::min(host.size(), host_name_bytes - 1));
  std::vector<char> all(rank == 0 ? host_name_bytes * static_cast<size_t>(size) : 0);
  MPI_Request request;
  MPI_CHECK(MPI_Igather(mine.data(), static_cast<int>(host_name_bytes), MPI_CHAR, all.data(),
                        static_cast<int>(host_name_bytes), MPI_CHAR, 0, comm, &request));
  comm::wait_bounded(request, timeout, "the gathering of the ranks' host names");
  std::vector<std::string> hosts;
  for (int r = 0; rank == 0 && r < size; ++r) hosts.emplace_back(all.data() + host_name_bytes * static_cast<size_t>(r));
  return hosts;
}

std::vector<RankTimes> gather_rank_times(const RankTimes& mine, MPI_Comm comm, std::chrono::milliseconds timeout) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  double values[3] = {mine.step, mine.data_wait, mine.reduction_wait};
  std::vector<double> all(rank == 0 ? 3 * static_cast<size_t>(size) : 0);
  MPI_Request request;
  MPI_CHECK(MPI_Igather(values, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, 0, comm, &request));
  comm::wait_bounded(request, timeout, "the gathering of the ranks' step times");
  std::vector<RankTimes> times;
  for (size_t r = 0; rank == 0 && r < static_cast<size_t>(size); ++r) {
    times.push_back(RankTimes{all[3 * r], all[3 * r + 1], all[3 * r + 2]});
  }
  return times;
}

std::string format_timing_line(int64_t step, const std::vector<RankTimes>& times, const std::vector<std::string>& hosts) {
  std::string line = fmt::format("timing step={}", step);
  const std::pair<const char*, double RankTimes::*> measures[] = {
      {"step_time", &RankTimes::step}, {"data_wait", &RankTimes::data_wait},
      {"reduction_wait", &RankTimes::reduction_wait}};
  for (const auto& [name, member] : measures) {
    if (times.empty()) break;
    auto by = [member = member](const RankTimes& a, const RankTimes& b) { return a.*member < b.*member; };
    const auto slowest = static_cast<size_t>(std::max_element(times.begin(), times.end(), by) - times.begin());
    const auto fastest = static_cast<size_t>(std::min_element(times.begin(), times.end(), by) - times.begin());
    line += fmt::format(" {} max={:.4f} (rank {} on {}) min={:.4f} (rank {} on {})", name, times[slowest].*member,
                        slowest, host_of(hosts, slowest), times[fastest].*member, fastest, host_of(hosts, fastest));
  }
  return line;
}

std::vector<std::string> StragglerWatch::observe(const std::vector<RankTimes>& times,
                                                 const std::vector<std::string>& hosts) {
  std::vector<std::string> warnings;
  if (times.size() < 2) return warnings;  // one rank waits for nobody
  streaks_.resize(times.size(), 0);
  std::vector<double> own;
  for (const auto& t : times) own.push_back(t.own());
  const double typical = median(own);
  for (size_t rank = 0; rank < times.size(); ++rank) {
    const bool slow = typical > 0 && own[rank] > rule_.factor * typical;
    streaks_[rank] = slow ? streaks_[rank] + 1 : 0;
    const int streak = streaks_[rank];
    // Due when the streak reaches the rule's length, then at twice, four times ... that length.
    const bool due = streak >= rule_.intervals && streak % rule_.intervals == 0 &&
                     ((streak / rule_.intervals) & (streak / rule_.intervals - 1)) == 0;
    if (!due) continue;
    warnings.push_back(fmt::format(
        "warning: straggler: rank {} on host {} has been slower than the median rank for {} log intervals in a row: "
        "{:.4f} s per step of its own work (step time less reduction wait) against the median's {:.4f} s ({:.2f}x; "
        "the threshold is {:.2f}x, TRAIN_STRAGGLER_FACTOR)",
        rank, host_of(hosts, rank), streak, own[rank], typical, own[rank] / typical, rule_.factor));
  }
  return warnings;
}

}  // namespace train
