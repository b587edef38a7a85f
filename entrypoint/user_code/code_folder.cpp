#include "entrypoint/user_code/code_folder.h"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <system_error>
#include <vector>

namespace train::user_code {

namespace {

constexpr std::string_view staging_prefix = ".train-code-staging-";

bool is_staging(const std::filesystem::path& entry) {
  return entry.filename().string().rfind(staging_prefix, 0) == 0;
}

// A mount point cannot be renamed onto, nor can anything be renamed into it from outside its mount.
bool is_mount_point(const std::filesystem::path& folder) {
  struct statx own {};
  if (::statx(AT_FDCWD, folder.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &own) == 0 &&
      (own.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0) {
    return (own.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  }
  struct stat status {};
  struct stat parent {};
  if (::stat(folder.c_str(), &status) != 0 || ::stat(folder.parent_path().c_str(), &parent) != 0) return false;
  return status.st_dev != parent.st_dev;
}

void rename_or_throw(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw std::filesystem::filesystem_error("cannot move the code into place", from, to,
                                            std::error_code(errno, std::generic_category()));
  }
}

}  // namespace

bool holds_code(const std::filesystem::path& folder) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    if (!is_staging(it->path())) return true;
  }
  return false;
}

CodeStaging::CodeStaging(const std::filesystem::path& code_folder) : code_folder_(code_folder) {
  std::filesystem::create_directories(code_folder_);
  inside_ = is_mount_point(code_folder_);
  const auto parent = inside_ ? code_folder_ : code_folder_.parent_path();
  OwnedFolder::remove_stale(parent, staging_prefix);
  staging_ = std::make_unique<OwnedFolder>(parent, staging_prefix);
  std::filesystem::create_directory(unpacked());
}

void CodeStaging::move_into_place() {
  if (!inside_) {
    // rename(2) replaces an empty folder in one step.
    rename_or_throw(unpacked(), code_folder_);
    return;
  }
  std::vector<std::filesystem::path> moved;
  try {
    for (const auto& entry : std::filesystem::directory_iterator(unpacked())) {
      const auto target = code_folder_ / entry.path().filename();
      rename_or_throw(entry.path(), target);
      moved.push_back(target);
    }
  } catch (...) {
    for (const auto& target : moved) {
      std::error_code ignored;
      if (std::rename(target.c_str(), (unpacked() / target.filename()).c_str()) != 0) {
        std::filesystem::remove_all(target, ignored);
      }
    }
    throw;
  }
}

}  // namespace train::user_code
