#include "runtime/data/sources/image_folder.h"

#include "runtime/data/data_error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <system_error>
#include <utility>

namespace train::data {

namespace fs = std::filesystem;

namespace {

bool ends_with_ignoring_case(std::string_view text, std::string_view suffix) {
  if (text.size() < suffix.size()) return false;
  text.remove_prefix(text.size() - suffix.size());
  for (size_t i = 0; i < suffix.size(); ++i) {
    char c = text[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != suffix[i]) return false;
  }
  return true;
}

bool hidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name.front() == '.';
}

bool is_folder(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);  // follows symbolic links, as os.walk(followlinks=True)
}

// A folder's identity, to tell a symbolic link back to a folder above it (which would list the images below
// it again and again) from a folder seen for the first time.
struct FolderId {
  dev_t device;
  ino_t inode;
  bool operator==(const FolderId& other) const { return device == other.device && inode == other.inode; }
};

FolderId folder_id(const fs::path& dir) {
  struct stat status {};
  if (::stat(dir.c_str(), &status) != 0) {
    throw DataError(fmt::format("image folder: cannot look at {}: {}", dir.string(), std::strerror(errno)));
  }
  return {status.st_dev, status.st_ino};
}

// sorted(os.walk(class_dir, followlinks=True)) then sorted(files): files ordered by (their folder, their
// name). `above` holds the folders from the class folder down to `dir`'s parent: a link back to one of them
// is a loop, reported rather than followed until the path grows too long (which silently repeated a
// class's images dozens of times).
void collect_images(const fs::path& dir, std::vector<std::pair<std::string, std::string>>& found,
                    std::vector<std::pair<FolderId, fs::path>>& above) {
  const FolderId id = folder_id(dir);
  for (const auto& [ancestor, ancestor_path] : above) {
    if (ancestor == id) {
      throw DataError(fmt::format("image folder: {} leads back to {} (a symbolic link loop), so its images would be "
                                  "counted again and again; remove or fix that link",
                                  dir.string(), ancestor_path.string()));
    }
  }
  if (above.size() > 64) {
    throw DataError(fmt::format("image folder: {} is nested more than 64 folders deep", dir.string()));
  }
  above.emplace_back(id, dir);
  std::error_code error;
  fs::directory_iterator it(dir, error);
  if (error) throw DataError(fmt::format("image folder: cannot list {}: {}", dir.string(), error.message()));
  for (; it != fs::directory_iterator(); it.increment(error)) {
    const fs::path& path = it->path();
    if (hidden(path)) continue;
    std::error_code followed;
    const auto status = fs::status(path, followed);
    if (followed && (followed.value() == ELOOP || is_image_file_name(path.filename().string()))) {
      // A link that leads nowhere (or round in circles) where an image or a folder of them should be.
      throw DataError(fmt::format("image folder: cannot follow {}: {}; remove or fix that link", path.string(),
                                  followed.message()));
    }
    if (fs::is_directory(status)) {
      collect_images(path, found, above);
    } else if (is_image_file_name(path.filename().string()) && fs::is_regular_file(status)) {
      found.emplace_back(dir.string(), path.filename().string());
    }
  }
  if (error) throw DataError(fmt::format("image folder: cannot list {}: {}", dir.string(), error.message()));
  above.pop_back();
}

}  // namespace

bool is_image_file_name(std::string_view name) {
  return ends_with_ignoring_case(name, ".jpg") || ends_with_ignoring_case(name, ".jpeg") ||
         ends_with_ignoring_case(name, ".png");
}

ImageFolder scan_image_folder(const std::string& root) {
  const fs::path root_path(root);
  std::error_code error;
  const auto status = fs::status(root_path, error);
  if (error || !fs::exists(status)) {
    throw DataError(fmt::format("image folder {}: does not exist{}", root,
                                error && error != std::errc::no_such_file_or_directory ? ": " + error.message()
                                                                                       : ""));
  }
  if (!fs::is_directory(status)) throw DataError(fmt::format("image folder {}: is not a folder", root));

  ImageFolder folder;
  folder.root = root;
  int loose_images = 0;
  fs::directory_iterator it(root_path, error);
  if (error) throw DataError(fmt::format("image folder {}: cannot list it: {}", root, error.message()));
  for (; it != fs::directory_iterator(); it.increment(error)) {
    const fs::path& path = it->path();
    if (hidden(path)) continue;
    if (is_folder(path)) {
      folder.classes.push_back(path.filename().string());
    } else if (is_image_file_name(path.filename().string())) {
      ++loose_images;
    }
  }
  if (error) throw DataError(fmt::format("image folder {}: cannot list it: {}", root, error.message()));
  if (folder.classes.empty()) {
    throw DataError(fmt::format(
        "image folder {}: no class subfolders found{}; expected one subfolder per class holding its JPEG or "
        "PNG files (e.g. {}/cat/0001.jpg)",
        root, loose_images > 0 ? fmt::format(" ({} image files lie directly in it)", loose_images) : "",
        root_path.lexically_normal().string()));
  }
  // Byte-wise order, which for UTF-8 names is Python's code-point order.
  std::sort(folder.classes.begin(), folder.classes.end());

  std::vector<std::string> empty_classes;
  for (size_t label = 0; label < folder.classes.size(); ++label) {
    std::vector<std::pair<std::string, std::string>> found;
    std::vector<std::pair<FolderId, fs::path>> above;
    collect_images(root_path / folder.classes[label], found, above);
    if (found.empty()) {
      empty_classes.push_back(folder.classes[label]);
      continue;
    }
    std::sort(found.begin(), found.end());
    for (auto& [dir, name] : found) {
      folder.paths.push_back((fs::path(dir) / name).string());
      folder.labels.push_back(static_cast<int32_t>(label));
    }
  }
  if (!empty_classes.empty()) {
    std::string list;
    for (size_t i = 0; i < empty_classes.size() && i < 10; ++i) list += (i ? ", " : "") + empty_classes[i];
    if (empty_classes.size() > 10) list += fmt::format(", ... ({} in all)", empty_classes.size());
    throw DataError(fmt::format(
        "image folder {}: no JPEG or PNG file (.jpg, .jpeg, .png) in the class subfolder{} {}; every class "
        "needs at least one image",
        root, empty_classes.size() > 1 ? "s" : "", list));
  }
  return folder;
}

}  // namespace train::data
