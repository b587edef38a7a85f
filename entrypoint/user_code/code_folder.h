// The code folder's contents change all at once or not at all: a fetch is unpacked into a staging folder and
// renamed into place, so a fetch that fails (or a launcher that is killed) leaves no half code folder behind.
// The staging folder is a sibling of the code folder (one rename(2) onto the empty folder), or inside it when
// the code folder is a mount point, which cannot be renamed onto (then its entries are renamed, and put back
// when one cannot be). A staging folder whose launcher died is swept by the next one.
#pragma once

#include "common/owned_folder.h"

#include <filesystem>
#include <memory>

namespace train::user_code {

// Whether `folder` holds anything but staging folders: the toolkit fetches only into an empty code folder.
bool holds_code(const std::filesystem::path& folder);

class CodeStaging {
 public:
  // Creates the code folder when it does not exist (as the toolkit does), sweeps stale staging folders, and
  // makes a staging folder for it. Throws std::filesystem::filesystem_error when a folder cannot be made.
  explicit CodeStaging(const std::filesystem::path& code_folder);

  // The empty folder to unpack or copy into.
  std::filesystem::path unpacked() const { return staging_->path() / "code"; }
  // Where a download goes (it does not exist yet).
  std::filesystem::path download() const { return staging_->path() / "download"; }

  // Moves what `unpacked()` holds into the code folder. Throws std::filesystem::filesystem_error, having put
  // back whatever it had moved.
  void move_into_place();

 private:
  std::filesystem::path code_folder_;
  bool inside_ = false;  // the staging folder is inside the code folder (a mount point)
  std::unique_ptr<OwnedFolder> staging_;
};

}  // namespace train::user_code
