#include "mpirun_outcome.h"

#include <regex>

namespace train {

void MpirunMessages::observe(const std::string& line) {
  static const std::regex noticed_signal(
      R"(mpirun noticed that process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+))");
  static const std::regex process_name(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
  static const std::regex exit_code(R"(^\s*Exit code:\s*(\d+))");
  std::smatch match;
  if (std::regex_search(line, match, noticed_signal)) {
    if (!failure_) {
      failure_ = RankFailure{std::stoi(match[1]), std::nullopt, std::stoi(match[3]), match[2]};
    }
    return;
  }
  if (std::regex_search(line, match, process_name)) {
    pending_process_rank_ = std::stoi(match[1]);
    return;
  }
  if (std::regex_search(line, match, exit_code) && pending_process_rank_) {
    if (!failure_) failure_ = RankFailure{*pending_process_rank_, std::stoi(match[1]), std::nullopt, ""};
    pending_process_rank_.reset();
    return;
  }
  // Keep mpirun's own words (not its dashed rules or blank lines) for a report that has no rank to blame.
  bool substantive = line.find_first_not_of(" -\t") != std::string::npos;
  if (substantive && own_lines_.size() < 40) own_lines_.push_back(line);
}

}  // namespace train
