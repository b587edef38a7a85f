// The error for anything wrong with the training data: a folder without classes, a file that cannot be
// read or decoded. The message names the path and the reason, and is meant for the user as it stands.
#pragma once

#include <stdexcept>
#include <string>

namespace train::data {

class DataError : public std::runtime_error {
 public:
  explicit DataError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace train::data
