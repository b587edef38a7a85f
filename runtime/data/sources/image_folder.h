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
  // What the index holds in memory, from its containers' capacities (strings' heap buffers included).
  int64_t bytes() const;
};

// True for the file names an image folder takes (.jpg, .jpeg, .png, any case).
bool is_image_file_name(std::string_view name);

// Scans `root`, following symbolic links. Throws DataError, naming the path, when it does not exist or is
// not a folder, when it has no class subfolders, when a class subfolder holds no JPEG or PNG file, or when
// a symbolic link leads back to a folder above it (a loop) or, in an image's place, nowhere.
ImageFolder scan_image_folder(const std::string& root);

// The folder's index as bytes and back, so that one process can scan the folder and hand the result to the
// others (every rank of every host walking the same million files costs each of them seconds). Parsing
// throws DataError on bytes it did not write.
std::string serialize_image_folder(const ImageFolder& folder);
ImageFolder parse_image_folder(const std::string& bytes);

// `folder` as found under `root` instead of its own root: every path below the old root moved to the new
// (a folder scanned on another host, where the same channel may be mounted elsewhere).
ImageFolder rooted_at(ImageFolder folder, const std::string& root);

}  // namespace train::data
