#include "entrypoint/job_report.h"

#include "common/log.h"

#include <fmt/format.h>

#include <filesystem>

namespace train {

namespace {

// The longest prefix of `text` of at most `limit` bytes that ends on a UTF-8 character boundary.
std::string cut_utf8(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut);
}

// The longest suffix of `text` of at most `limit` bytes that starts on a character boundary.
std::string tail_utf8(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t start = text.size() - limit;
  while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
  return text.substr(start);
}

}  // namespace

std::string compose_failure_text(const std::string& summary, const std::vector<std::string>& details,
                                 size_t limit) {
  std::string text = cut_utf8(summary, limit > 0 ? limit - 1 : 0) + "\n";
  if (details.empty() || text.size() >= limit) return text;
  // Fill from the last detail line backwards: the end of a rank's error output is where the cause is.
  size_t budget = limit - text.size();
  std::vector<std::string> kept;
  for (auto it = details.rbegin(); it != details.rend() && budget > 0; ++it) {
    std::string line = *it + "\n";
    if (line.size() <= budget) {
      kept.push_back(line);
      budget -= line.size();
    } else {
      kept.push_back(tail_utf8(line, budget));
      budget = 0;
    }
  }
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) text += *it;
  return text;
}

bool write_failure_file(const JobPaths& paths, const std::string& text) {
  const std::string path = paths.failure_file().string();
  try {
    std::error_code ignored;
    std::filesystem::create_directories(paths.output(), ignored);
    AtomicFile file(path);
    file.write(text);
    // A failure file written by user code wins.
    if (!file.commit_unless_present()) {
      log_info("{} already exists (written by the job itself); leaving it as it is", path);
      return false;
    }
    return true;
  } catch (const std::exception& error) {
    log_error("cannot write the failure file: {}", error.what());
    return false;
  }
}

bool write_success_file(const JobPaths& paths) {
  try {
    std::error_code ignored;
    std::filesystem::create_directories(paths.output(), ignored);
    write_file_atomically(paths.success_file().string(), "");
    return true;
  } catch (const std::exception& error) {
    log_error("cannot write the success file: {}", error.what());
    return false;
  }
}

void start_job_report(const JobPaths& paths) {
  for (const auto& dir : {paths.model(), paths.output_data()}) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) log_error("cannot create {}: {}", dir.string(), error.message());
  }
  std::error_code ignored;
  std::filesystem::remove(paths.success_file(), ignored);
  if (std::filesystem::exists(paths.failure_file(), ignored)) {
    auto previous = paths.failure_file();
    previous += ".previous";
    std::filesystem::rename(paths.failure_file(), previous, ignored);
    log_info("moved the failure file of an earlier run to {}", previous.string());
  }
}

}  // namespace train
