#include "job/host_agreement.h"

#include "common/fnv1a.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sys/stat.h>

namespace train {

namespace {

constexpr size_t shown_limit = 60;
constexpr size_t text_limit = 32 * 1024;
// How many files of the program are read, and how much of each: the code, not a data set named on the line.
constexpr uint64_t file_bytes_read = uint64_t{256} << 20;

std::string hex(uint64_t value) { return fmt::format("{:016x}", value); }

std::string digest_of(const std::string& text) { return hex(fnv1a64(text.data(), text.size())); }

// ASCII (JSON's escapes for the rest), cut to the limit.
std::string shown(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  if (text.size() > shown_limit) text = text.substr(0, shown_limit - 3) + "...";
  return text;
}

std::string quoted(const std::string& name) { return shown(nlohmann::json(name)); }

// The file's size and a digest of its first file_bytes_read bytes; nullopt when it is not a regular file here.
std::optional<AgreementItem> program_file(const std::string& word) {
  struct stat status {};
  if (word.empty() || ::stat(word.c_str(), &status) != 0 || !S_ISREG(status.st_mode)) return std::nullopt;
  std::ifstream in(word, std::ios::binary);
  if (!in) return std::nullopt;
  Fnv1a64 hash;
  std::array<char, 65536> buffer{};
  uint64_t read = 0;
  while (read < file_bytes_read && in.read(buffer.data(), buffer.size()).gcount() > 0) {
    hash.add(buffer.data(), static_cast<size_t>(in.gcount()));
    read += static_cast<uint64_t>(in.gcount());
  }
  const auto size = static_cast<uint64_t>(status.st_size);
  hash.add(&size, sizeof size);
  return AgreementItem{"the program's files", "the program's file " + quoted(word), hex(hash.value()),
                       fmt::format("{} bytes with checksum {}", size, hex(hash.value()))};
}

// Whether `word` names a file in a directory of PATH: the image's interpreters and tools (/bin/sh,
// /usr/bin/python3), alike on every host, not the job's code.
bool in_a_path_directory(const std::string& word) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::error_code error;
  const auto directory = std::filesystem::weakly_canonical(std::filesystem::absolute(word, error).parent_path(), error);
  if (error) return false;
  const std::string entries = path;
  for (size_t start = 0; start <= entries.size();) {
    const size_t end = std::min(entries.find(':', start), entries.size());
    const std::string entry = entries.substr(start, end - start);
    if (!entry.empty() && std::filesystem::weakly_canonical(entry, error) == directory && !error) return true;
    start = end + 1;
  }
  return false;
}

// One item per section: its items' names and digests, in order.
std::vector<AgreementItem> by_section(const std::vector<AgreementItem>& items) {
  std::map<std::string, std::string> sections;
  for (const auto& item : items) sections[item.section] += item.what + '\n' + item.digest + '\n';
  std::vector<AgreementItem> summary;
  for (const auto& [section, text] : sections) {
    summary.push_back({section, section, digest_of(text), "checksum " + digest_of(text)});
  }
  return summary;
}

}  // namespace

std::vector<AgreementItem> host_agreement_items(const JobDescription& job, const std::vector<std::string>& program) {
  std::vector<AgreementItem> items;
  for (const auto& [name, value] : job.hyperparameters.decoded().items()) {
    items.push_back({"the hyperparameters", "hyperparameter " + quoted(name), digest_of(value.dump()), shown(value)});
  }
  for (const auto& channel : job.input.channels) {
    const std::string delivery =
        fmt::format("{} {} RecordWrapperType {}{}", to_string(channel.mode), to_string(channel.distribution),
                    to_string(channel.record_wrapper),
                    channel.content_type.empty() ? "" : " ContentType " + channel.content_type);
    items.push_back({"the channels", "channel " + quoted(channel.name), digest_of(delivery), shown(delivery)});
  }
  // The program's code: the first word that names a regular file outside PATH's directories (the script an
  // interpreter runs, or the program given by its path). Later words may name the job's data or a host's own
  // files.
  for (const auto& word : program) {
    if (in_a_path_directory(word)) continue;
    if (auto file = program_file(word)) {
      items.push_back(std::move(*file));
      break;
    }
  }
  return items;
}

std::string encode_host_agreement(const std::vector<AgreementItem>& items) {
  const auto encode = [](const std::vector<AgreementItem>& listed, bool summarized) {
    nlohmann::json document = {{"summarized", summarized}, {"items", nlohmann::json::object()}};
    for (const auto& item : listed) document["items"][item.what] = {item.section, item.digest, item.shown};
    return document.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  };
  std::string text = encode(items, false);
  return text.size() <= text_limit ? text : encode(by_section(items), true);
}

std::vector<std::string> host_differences(const std::string& masters, const std::vector<AgreementItem>& mine,
                                          const std::string& master_host, const std::string& this_host) {
  const auto document = nlohmann::json::parse(masters, nullptr, /*allow_exceptions=*/false);
  if (!document.is_object() || !document.contains("items") || !document["items"].is_object()) return {};
  const bool summarized = document.value("summarized", false);
  std::map<std::string, AgreementItem> theirs;
  for (const auto& [what, entry] : document["items"].items()) {
    if (!entry.is_array() || entry.size() != 3 || !entry[0].is_string() || !entry[1].is_string() ||
        !entry[2].is_string()) {
      return {};
    }
    theirs[what] = {entry[0], what, entry[1], entry[2]};
  }
  std::map<std::string, AgreementItem> ours;
  for (auto& item : summarized ? by_section(mine) : mine) ours[item.what] = item;
  std::set<std::string> names;
  for (const auto& [what, item] : theirs) names.insert(what);
  for (const auto& [what, item] : ours) names.insert(what);
  std::vector<std::string> differences;
  for (const auto& what : names) {
    const auto there = theirs.find(what);
    const auto here = ours.find(what);
    if (summarized && there != theirs.end() && here != ours.end()) {
      if (there->second.digest == here->second.digest) continue;
      differences.push_back(fmt::format("{} differ between {} and the master {} (checksums {} and {}: the job "
                                        "description is too large to name each key)",
                                        what, this_host, master_host, here->second.digest, there->second.digest));
    } else if (there != theirs.end() && here != ours.end()) {
      if (there->second.digest == here->second.digest) continue;
      differences.push_back(fmt::format("{} is {} on {} and {} on the master {}", what, here->second.shown, this_host,
                                        there->second.shown, master_host));
    } else if (there != theirs.end()) {
      differences.push_back(fmt::format("{} is {} on the master {} and absent on {}", what, there->second.shown,
                                        master_host, this_host));
    } else {
      differences.push_back(fmt::format("{} is {} on {} and absent on the master {}", what, here->second.shown,
                                        this_host, master_host));
    }
  }
  return differences;
}

std::optional<std::string> host_disagreement(const JobDescription& job, const EnvironmentMap& environment,
                                             const std::vector<std::string>& program) {
  const auto masters = lookup(environment, host_agreement_variable);
  if (!masters || masters->empty() || job.cluster.is_master()) return std::nullopt;
  const auto differences = host_differences(*masters, host_agreement_items(job, program), job.cluster.master_host,
                                            job.cluster.current_host);
  if (differences.empty()) return std::nullopt;
  std::string message = fmt::format("Host {}'s job description differs from the master {}'s: {}{}.",
                                    job.cluster.current_host, job.cluster.master_host, differences.front(),
                                    differences.size() > 1 ? fmt::format(" (and {} more below)", differences.size() - 1)
                                                           : "");
  for (size_t i = 1; i < differences.size() && i <= 20; ++i) message += "\n" + differences[i] + ".";
  message += fmt::format("\nEvery host of a job must be given the same hyperparameters, channels and code; train "
                         "compares them before the first step, with the master's as the reference.");
  return message;
}

}  // namespace train
