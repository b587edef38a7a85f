#include "runtime/data/sources/image_folder.h"

#include "common/container_bytes.h"
#include "common/ordered_parallel_for.h"
#include "runtime/data/data_error.h"
#include "runtime/data/records/index_bytes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
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

std::string error_text(int error) { return std::error_code(error, std::generic_category()).message(); }

// `dir`/`name` as std::filesystem's operator/ joins them (no second separator after a trailing one).
std::string joined(const std::string& dir, std::string_view name) {
  std::string path;
  path.reserve(dir.size() + 1 + name.size());
  path += dir;
  if (!dir.empty() && dir.back() != '/') path += '/';
  path += name;
  return path;
}

// A folder's identity, to tell a symbolic link back to a folder above it (which would list the images below
// it again and again) from a folder seen for the first time.
struct FolderId {
  dev_t device;
  ino_t inode;
  bool operator==(const FolderId& other) const { return device == other.device && inode == other.inode; }
};

FolderId folder_id(const std::string& dir) {
  struct stat status {};
  if (::stat(dir.c_str(), &status) != 0) {
    throw DataError(fmt::format("image folder: cannot look at {}: {}", dir, std::strerror(errno)));
  }
  return {status.st_dev, status.st_ino};
}

// The images directly in one folder of a class.
struct FolderImages {
  std::string dir;
  std::vector<std::string> names;
};

struct ClosedDir {
  void operator()(DIR* dir) const { ::closedir(dir); }
};

// sorted(os.walk(class_dir, followlinks=True)) then sorted(files): files ordered by (their folder, their
// name), which the caller sorts. `above` holds the folders from the class folder down to `dir`'s parent: a
// link back to one of them is a loop, reported rather than followed until the path grows too long (which
// silently repeated a class's images dozens of times). An entry's kind comes from readdir's d_type where the
// file system gives it (no stat of each of a million files: their path lookups were most of the scan's
// time); links, and entries of an unknown kind or in a folder this process may list but not search, are
// looked at with stat (following links), as before.
void collect_images(const std::string& dir, std::vector<FolderImages>& found,
                    std::vector<std::pair<FolderId, std::string>>& above) {
  const FolderId id = folder_id(dir);
  for (const auto& [ancestor, ancestor_path] : above) {
    if (ancestor == id) {
      throw DataError(fmt::format("image folder: {} leads back to {} (a symbolic link loop), so its images would be "
                                  "counted again and again; remove or fix that link",
                                  dir, ancestor_path));
    }
  }
  if (above.size() > 64) {
    throw DataError(fmt::format("image folder: {} is nested more than 64 folders deep", dir));
  }
  above.emplace_back(id, dir);
  const std::unique_ptr<DIR, ClosedDir> listing(::opendir(dir.c_str()));
  if (!listing) throw DataError(fmt::format("image folder: cannot list {}: {}", dir, error_text(errno)));
  const int dir_fd = ::dirfd(listing.get());
  const bool searchable = ::faccessat(dir_fd, ".", X_OK, 0) == 0;  // else every entry's stat fails, as before
  FolderImages here{dir, {}};
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(listing.get());
    if (entry == nullptr) break;
    const std::string_view name(entry->d_name);
    if (name.empty() || name.front() == '.') continue;  // hidden, and . and ..
    bool folder = searchable && entry->d_type == DT_DIR;
    bool regular = searchable && entry->d_type == DT_REG;
    if (!folder && !regular) {
      struct stat status {};
      if (::fstatat(dir_fd, entry->d_name, &status, 0) != 0) {
        const int error = errno;
        if (error == ELOOP || is_image_file_name(name)) {
          // A link that leads nowhere (or round in circles) where an image or a folder of them should be.
          throw DataError(fmt::format("image folder: cannot follow {}: {}; remove or fix that link", joined(dir, name),
                                      error_text(error)));
        }
        continue;
      }
      folder = S_ISDIR(status.st_mode);
      regular = S_ISREG(status.st_mode);
    }
    if (folder) {
      collect_images(joined(dir, name), found, above);
    } else if (regular && is_image_file_name(name)) {
      here.names.emplace_back(name);
    }
  }
  if (errno != 0) throw DataError(fmt::format("image folder: cannot list {}: {}", dir, error_text(errno)));
  above.pop_back();
  if (!here.names.empty()) found.push_back(std::move(here));
}

// One class's images in dataset order.
std::vector<std::string> class_images(const std::string& class_dir) {
  std::vector<FolderImages> found;
  std::vector<std::pair<FolderId, std::string>> above;
  collect_images(class_dir, found, above);
  std::sort(found.begin(), found.end(), [](const FolderImages& a, const FolderImages& b) { return a.dir < b.dir; });
  size_t count = 0;
  for (auto& folder : found) {
    std::sort(folder.names.begin(), folder.names.end());
    count += folder.names.size();
  }
  std::vector<std::string> paths;
  paths.reserve(count);
  for (const auto& folder : found) {
    for (const auto& name : folder.names) paths.push_back(joined(folder.dir, name));
  }
  return paths;
}

}  // namespace

int64_t ImageFolder::bytes() const {
  return static_cast<int64_t>(sizeof(ImageFolder)) + string_bytes(kind) + string_bytes(root) + strings_bytes(classes) +
         strings_bytes(paths) + vector_bytes(labels);
}

namespace {

constexpr char kFolderMagic[8] = {'T', 'R', 'I', 'M', 'G', '0', '0', '1'};
constexpr const char* kShared = "a shared image folder index";

}  // namespace

std::string serialize_image_folder(const ImageFolder& folder) {
  std::string out(kFolderMagic, sizeof kFolderMagic);
  size_t size = out.size() + folder.kind.size() + folder.root.size() + 64 + folder.labels.size() * 4;
  for (const auto& name : folder.classes) size += 8 + name.size();
  for (const auto& path : folder.paths) size += 8 + path.size();
  out.reserve(size);
  put_text(out, folder.kind);
  put_text(out, folder.root);
  put_value<uint64_t>(out, folder.classes.size());
  for (const auto& name : folder.classes) put_text(out, name);
  put_value<uint64_t>(out, folder.paths.size());
  for (const auto& path : folder.paths) put_text(out, path);
  put_value<uint64_t>(out, folder.labels.size());
  out.append(reinterpret_cast<const char*>(folder.labels.data()), folder.labels.size() * sizeof(int32_t));
  return out;
}

ImageFolder parse_image_folder(const std::string& bytes) {
  if (bytes.size() < sizeof kFolderMagic ||
      bytes.compare(0, sizeof kFolderMagic, kFolderMagic, sizeof kFolderMagic) != 0) {
    throw DataError(fmt::format("{} does not start with its magic (an internal error: its builder and reader "
                                "disagree)", kShared));
  }
  IndexBytes in(bytes, sizeof kFolderMagic, kShared);
  ImageFolder folder;
  folder.kind = in.text();
  folder.root = in.text();
  const uint64_t classes = in.count(8);
  folder.classes.reserve(classes);
  for (uint64_t i = 0; i < classes; ++i) folder.classes.push_back(in.text());
  const uint64_t paths = in.count(8);
  folder.paths.reserve(paths);
  for (uint64_t i = 0; i < paths; ++i) folder.paths.push_back(in.text());
  const uint64_t labels = in.count(sizeof(int32_t));
  if (labels != paths) throw DataError(fmt::format("{} has {} labels for {} files", kShared, labels, paths));
  folder.labels.resize(labels);
  for (auto& label : folder.labels) {
    label = in.get<int32_t>();
    if (label < 0 || static_cast<uint64_t>(label) >= classes) {
      throw DataError(fmt::format("{} has a label outside its {} classes", kShared, classes));
    }
  }
  if (!in.done()) throw DataError(fmt::format("{} has bytes after its end (its builder and reader disagree)", kShared));
  return folder;
}

ImageFolder rooted_at(ImageFolder folder, const std::string& root) {
  if (folder.root == root) return folder;
  const std::string from = joined(folder.root, ""), to = joined(root, "");
  for (auto& path : folder.paths) {
    if (path.compare(0, from.size(), from) == 0) path.replace(0, from.size(), to);
  }
  folder.root = root;
  return folder;
}

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

  std::vector<std::string> class_dirs;
  for (const auto& name : folder.classes) class_dirs.push_back((root_path / name).string());
  // A few classes at once (a class's listing waits on the file system; on a network one, mostly for answers);
  // a failure is the one the first failing class would have given scanning them one after the other.
  std::vector<std::vector<std::string>> images(class_dirs.size());
  ordered_parallel_for(class_dirs.size(), 8, [&](size_t label) { images[label] = class_images(class_dirs[label]); });
  size_t total = 0;
  for (const auto& paths : images) total += paths.size();
  folder.paths.reserve(total);
  folder.labels.reserve(total);
  std::vector<std::string> empty_classes;
  for (size_t label = 0; label < folder.classes.size(); ++label) {
    if (images[label].empty()) {
      empty_classes.push_back(folder.classes[label]);
      continue;
    }
    for (auto& path : images[label]) folder.paths.push_back(std::move(path));
    folder.labels.insert(folder.labels.end(), images[label].size(), static_cast<int32_t>(label));
    std::vector<std::string>().swap(images[label]);
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
