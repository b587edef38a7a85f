// The unit tests' throw-away folder: every scratch folder the tests make (the job description's /opt/ml-like
// folder, the data tests' folders, the model files' folder, the report's SAGEMAKER_BASE_DIR) is one of these.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>

namespace train::testing {

// A folder made with mkdtemp under the system's temporary directory (its name starts with `prefix`), removed
// with everything in it when the object goes.
class TempFolder {
 public:
  explicit TempFolder(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The names of everything directly in the folder `relative` to this one (this one itself by default).
  std::set<std::string> entries(const std::filesystem::path& relative = {}) const {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_ / relative)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace train::testing
