// A temporary folder that says whose it is: named PREFIX-PID-XXXXXX, with this process's identity
// (common/process_identity.h) in its `owner` file, and removed with its contents when the OwnedFolder goes.
// A process killed outright (SIGKILL, the out-of-memory killer) leaves its folder behind; the next one sweeps
// the folders whose owner has ended, which a pid alone cannot tell (pids are reused, and a live process of
// another PID namespace may share the parent folder).
#pragma once

#include "common/non_copyable.h"

#include <filesystem>
#include <string_view>
#include <vector>

namespace train {

class OwnedFolder : private NonCopyable {
 public:
  // Makes `parent`/`prefix`PID-XXXXXX and its owner file. Throws std::filesystem::filesystem_error (the
  // folder's pattern as path1, mkdtemp's errno as code) when the folder cannot be made, and the owner file's
  // errors as common/atomic_file.h throws them.
  OwnedFolder(const std::filesystem::path& parent, std::string_view prefix);
  ~OwnedFolder();
  const std::filesystem::path& path() const { return path_; }

  // Removes the folders `prefix`* in `parent` whose owner has ended, and returns them: only this user's real
  // folders (never what a link points to), never a live owner's, nor one whose owner cannot be judged.
  static std::vector<std::filesystem::path> remove_stale(const std::filesystem::path& parent,
                                                         std::string_view prefix);

 private:
  std::filesystem::path path_;
};

}  // namespace train
