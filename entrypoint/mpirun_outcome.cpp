#include "entrypoint/mpirun_outcome.h"

#include "entrypoint/child_process.h"

#include <fmt/format.h>

#include <regex>

namespace train {

int RankFailure::code() const {
  if (signal) return 128 + *signal;
  return exit_code.value_or(1);
}

void MpirunMessages::observe(const std::string& line) {
  static const std::regex noticed_signal(
      R"(mpirun noticed that process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+))");
  static const std::regex process_name(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
  static const std::regex exit_code(R"(^\s*Exit code:\s*(\d+))");
  static const std::regex abort_rank(R"(MPI_ABORT was invoked on rank (\d+) in communicator)");
  static const std::regex abort_code(R"(^\s*with errorcode (-?\d+))");
  // Open MPI 4.1's words for a command line it refuses (its help texts: an unknown option; a mapping, ranking
  // or binding policy it does not know; a word taken for the program to run, as when an option lacks its value).
  static const std::regex unknown_option(R"re(^mpirun: Error: unknown option "([^"]*)")re");
  static const std::regex unknown_policy(R"(The specified (mapping|ranking|binding) policy is not recognized)");
  static const std::regex policy(R"(^\s*Policy:\s*(.*\S))");
  static const std::regex no_executable(R"(mpirun was unable to find the specified executable file)");
  static const std::regex executable(R"(^\s*Executable:\s*(.*\S))");
  std::smatch match;
  if (usage_error_.empty()) {
    if (std::regex_search(line, match, unknown_option)) {
      usage_error_ = fmt::format("mpirun does not know the option \"{}\"", match[1].str());
    } else if (std::regex_search(line, match, unknown_policy)) {
      pending_usage_ = match[1].str();
    } else if (std::regex_search(line, match, no_executable)) {
      pending_usage_ = "executable";
    } else if (!pending_usage_.empty() && pending_usage_ != "executable" && std::regex_search(line, match, policy)) {
      usage_error_ = fmt::format("mpirun does not know the {} policy \"{}\"", pending_usage_, match[1].str());
    } else if (pending_usage_ == "executable" && std::regex_search(line, match, executable)) {
      usage_error_ = fmt::format("mpirun found no program \"{}\" to run (an option before it may lack its value, "
                                 "so that mpirun took the next word for the program)",
                                 match[1].str());
    }
  }
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
  if (std::regex_search(line, match, abort_rank)) {
    pending_abort_rank_ = std::stoi(match[1]);
    return;
  }
  if (std::regex_search(line, match, abort_code) && pending_abort_rank_) {
    // mpirun exits with the error code modulo 256, as any process exit code.
    int code = static_cast<int>(static_cast<unsigned>(std::stoi(match[1])) & 0xFFu);
    if (!failure_) failure_ = RankFailure{*pending_abort_rank_, code, std::nullopt, ""};
    pending_abort_rank_.reset();
    return;
  }
  // Keep mpirun's own words (not its dashed rules or blank lines) for a report that has no rank to blame.
  bool substantive = line.find_first_not_of(" -\t") != std::string::npos;
  if (substantive && own_lines_.size() < 40) own_lines_.push_back(line);
  // Open MPI's "node-died" message: mpirun then exits with ORTE_ERR_COMM_FAILURE (-51), which reads as 205 and
  // looks like 128 + a signal. Said in words, with the host.
  static const std::regex lost_daemon(R"(ORTE has lost communication with a remote daemon)");
  static const std::regex remote_daemon(R"(^\s*Remote daemon:\s*\S+ on node (\S+))");
  if (std::regex_search(line, lost_daemon)) {
    daemon_lost_ = true;
  } else if (daemon_lost_ && lost_daemon_host_.empty() && std::regex_search(line, match, remote_daemon)) {
    lost_daemon_host_ = match[1].str();
    lost_daemon_sentence_ =
        fmt::format("mpirun lost its daemon on host {}: that host died, or the network between it and this host "
                    "failed, or its daemon was killed (mpirun then exits with {}: Open MPI's communication failure, "
                    "not a signal); that host's own log and failure file say more if it still runs",
                    lost_daemon_host_, mpirun_lost_daemon_exit_code);
  }
}

bool MpirunMessages::observe_rank_line(int rank, std::string_view line) {
  auto report = parse_rank_end_report(line);
  if (!report || report->rank != rank) return false;
  if (!first_rank_report_) first_rank_report_ = report;
  return true;
}

std::string rank_end_report(int rank, const std::string& program, int wait_status) {
  std::string name = program;
  for (char& c : name) {
    if (c == '`' || c == '\n' || c == '\r') c = '?';
  }
  return fmt::format("[train] rank {}: command `{}` {}", rank, name, describe_wait_status(wait_status));
}

std::optional<RankFailure> parse_rank_end_report(std::string_view line) {
  static const std::regex report(
      R"(^\[train\] rank (\d{1,9}): command `[^`]*` (?:exited with code (\d{1,3})|was killed by signal (\d{1,3}) \([^)]*\))$)");
  std::match_results<std::string_view::const_iterator> match;
  if (!std::regex_match(line.begin(), line.end(), match, report)) return std::nullopt;
  RankFailure failure;
  failure.rank = std::stoi(match[1].str());
  if (match[2].matched) failure.exit_code = std::stoi(match[2].str());
  if (match[3].matched) failure.signal = std::stoi(match[3].str());
  return failure;
}

}  // namespace train
