#include "common/owned_folder.h"

#include "common/atomic_file.h"
#include "common/process_identity.h"

#include <fmt/format.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace train {

namespace {

constexpr std::string_view owner_file = "owner";

}  // namespace

OwnedFolder::OwnedFolder(const std::filesystem::path& parent, std::string_view prefix) {
  std::string pattern = (parent / fmt::format("{}{}-XXXXXX", prefix, ::getpid())).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::filesystem::filesystem_error("cannot create the folder", pattern,
                                            std::error_code(errno, std::generic_category()));
  }
  path_ = pattern;
  try {
    write_file_atomically(path_ / owner_file, this_process().to_text());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
    throw;
  }
}

OwnedFolder::~OwnedFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::vector<std::filesystem::path> OwnedFolder::remove_stale(const std::filesystem::path& parent,
                                                             std::string_view prefix) {
  std::vector<std::filesystem::path> removed;
  std::error_code error;
  for (std::filesystem::directory_iterator it(parent, error), end; !error && it != end; it.increment(error)) {
    if (it->path().filename().string().rfind(prefix, 0) != 0) continue;
    // Only a folder of this user's (the parent may be /tmp or /dev/shm, shared by every user), never a link.
    struct stat status {};
    if (::lstat(it->path().c_str(), &status) != 0 || !S_ISDIR(status.st_mode) || status.st_uid != ::geteuid()) {
      continue;
    }
    std::ifstream in(it->path() / owner_file);
    std::string text;
    std::getline(in, text);
    const auto owner = ProcessIdentity::from_text(text);
    if (!owner || !process_has_ended(*owner)) continue;  // a live owner's, or one we cannot judge
    std::error_code ignored;
    if (std::filesystem::remove_all(it->path(), ignored) > 0) removed.push_back(it->path());
  }
  return removed;
}

}  // namespace train
