// An image folder as torchvision's ImageFolder reads it: one subfolder per class, the classes in sorted
// order (label i is the i-th name), each class's images found recursively under its subfolder and
// listed in the order of sorted(os.walk(...)) then sorted file names. Differences from torchvision: only
// JPEG and PNG files are taken (.jpg, .jpeg, .png in any letter case; other files are ignored), and
// names starting with '.' (.ipynb_checkpoints, .DS_Store, ...) are skipped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace train::data {

struct ImageFolder {
  std::string kind = "image folder";  // or "image list" (a .lst file's images): for messages
  std::string root;
  std::vector<std::string> classes;  // sorted subfolder names; label i is classes[i]
  std::vector<std::string> paths;    // every sample's file, in dataset order
  std::vector<int32_t> labels;       // every sample's label, parallel to paths

  int64_t size() const { return static_cast<int64_t>(paths.size()); }
};

// True for the file names an image folder takes (.jpg, .jpeg, .png, any case).
bool is_image_file_name(std::string_view name);

// Scans `root`, following symbolic links. Throws DataError, naming the path, when it does not exist or is
// not a folder, when it has no class subfolders, when a class subfolder holds no JPEG or PNG file, or when
// a symbolic link leads back to a folder above it (a loop) or, in an image's place, nowhere.
ImageFolder scan_image_folder(const std::string& root);

}  // namespace train::data
