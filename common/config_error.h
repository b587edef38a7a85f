// The error for anything wrong in the job description. Its message is meant for the user as it stands:
// what was expected, what was found, what to do.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace train {

class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& message) : std::runtime_error(message) {}
};

// Collects several problems so that one run of `train validate` reports all of them.
class ConfigProblems {
 public:
  void add(std::string message) { messages_.push_back(std::move(message)); }
  bool empty() const { return messages_.empty(); }
  // Throws one ConfigError whose message lists every problem, one per line.
  void throw_if_any() const;

 private:
  std::vector<std::string> messages_;
};

}  // namespace train
