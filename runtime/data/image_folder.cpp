#include "runtime/data/image_folder.h"

#include "runtime/data/data_error.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
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

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

// sorted(os.walk(class_dir)) then sorted(files): files ordered by (their folder, their name).
void collect_images(const fs::path& dir, std::vector<std::pair<std::string, std::string>>& found, int depth) {
  if (depth > 64) {
    throw DataError(fmt::format("image folder: {} is nested more than 64 folders deep (a symbolic link loop?)",
                                dir.string()));
  }
  std::error_code error;
  fs::directory_iterator it(dir, error);
  if (error) throw DataError(fmt::format("image folder: cannot list {}: {}", dir.string(), error.message()));
  for (; it != fs::directory_iterator(); it.increment(error)) {
    const fs::path& path = it->path();
    if (hidden(path)) continue;
    if (is_folder(path)) {
      collect_images(path, found, depth + 1);
    } else if (is_image_file_name(path.filename().string()) && is_file(path)) {
      found.emplace_back(dir.string(), path.filename().string());
    }
  }
  if (error) throw DataError(fmt::format("image folder: cannot list {}: {}", dir.string(), error.message()));
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
    collect_images(root_path / folder.classes[label], found, 0);
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
