// Files that appear whole or not at all: the report files, model files and checkpoints. The content goes to
// a temporary name in the same directory (`PATH.tmp-XXXXXX`), is flushed to disk, and is renamed over
// PATH; then the directory is flushed so the rename itself survives a crash. Until the rename, a file
// already at PATH stays as it was, so a reader (or SageMaker's checkpoint sync) never sees half a file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace train {

class AtomicFile {
 public:
  // Creates the temporary file next to `path`. Throws std::runtime_error naming the file on failure.
  explicit AtomicFile(std::string path, mode_t mode = 0644);
  // Removes the temporary file unless commit() succeeded: an abandoned write leaves nothing behind.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends to the temporary file. Throws std::runtime_error naming the file on failure.
  void write(const void* data, size_t size);
  void write(std::string_view data) { write(data.data(), data.size()); }

  // fsync, close, rename over the final path, fsync of the directory. Throws on failure (the temporary
  // file is then removed and the final path is untouched).
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return temporary_; }

 private:
  std::string path_;
  std::string temporary_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `content` to `path` as one AtomicFile.
void write_file_atomically(const std::string& path, std::string_view content);

// Flushes a directory's entries (after a rename or unlink in it). Throws std::runtime_error on failure.
void sync_directory(const std::string& directory);

// Removes `path.tmp-XXXXXX` files that an earlier, interrupted writer of `path` left behind. Returns how
// many it removed. Errors are ignored: a leftover temporary file is untidy, not wrong.
int remove_stale_temporaries(const std::string& path);

}  // namespace train
