// Files that appear whole or not at all: the report files, model files and checkpoints. The content goes to
// a temporary name in the same directory (`PATH.tmp-XXXXXX`), is flushed to disk, and is renamed over
// PATH; then the directory is flushed so the rename itself survives a crash. Until the rename, a file
// already at PATH stays as it was, so a reader (or SageMaker's checkpoint sync) never sees half a file.
// Every file train makes is created here (create_new_file, create_unique_file): never through a planted
// link, and with the permissions the process's umask allows.
#pragma once

#include "common/non_copyable.h"

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace train {

// Creates `path`, which must not exist yet: O_CREAT | O_EXCL | O_NOFOLLOW, so that a file or a symbolic link
// planted under that name (in a folder others can write: /dev/shm, /tmp) is never followed, truncated or
// reused. `mode` is narrowed by the process's umask, as for any program's files. Returns the descriptor
// (close-on-exec), or -1 with errno set.
int create_new_file(const std::string& path, mode_t mode = 0666);

// The same under a name of its own: `prefix` and six random letters and digits (as mkstemp, but with `mode`
// narrowed by the umask rather than 0600). Sets `path` to the name; returns the descriptor or -1 with errno.
int create_unique_file(const std::string& prefix, std::string& path, mode_t mode = 0666);

// Opens `path` for appending, creating it when missing (`mode` narrowed by the umask); a symbolic link in its
// place is refused (O_NOFOLLOW: ELOOP), not followed. Returns the descriptor (close-on-exec) or -1 with errno.
int open_file_for_appending(const std::string& path, mode_t mode = 0666);

class AtomicFile : private NonCopyable {
 public:
  // Creates the temporary file next to `path` (create_unique_file: the final file gets `mode` less the
  // umask). Throws std::runtime_error naming the file on failure.
  explicit AtomicFile(std::string path, mode_t mode = 0666);
  // Removes the temporary file unless commit() succeeded: an abandoned write leaves nothing behind.
  ~AtomicFile();

  // Appends to the temporary file. Throws std::runtime_error naming the file on failure.
  void write(const void* data, size_t size);
  void write(std::string_view data) { write(data.data(), data.size()); }

  // fsync, close, rename over the final path, fsync of the directory. Throws on failure (the temporary
  // file is then removed and the final path is untouched).
  void commit();
  // The same, but a file already at the final path is kept as it is (link() instead of rename()): returns
  // false then, and the content written here is dropped.
  bool commit_unless_present();

  const std::string& path() const { return path_; }
  const std::string& temporary_path() const { return temporary_; }

 private:
  void flush_and_close();

  std::string path_;
  std::string temporary_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `content` to `path` as one AtomicFile.
void write_file_atomically(const std::string& path, std::string_view content);

// Makes `folder`, and each folder between `root` and it, when missing; a symbolic link (or anything but a
// folder) in the place of any of them is refused, not followed: std::runtime_error "FOLDER is a symbolic link
// (to TARGET), which train does not follow: ...". `root` itself is taken as it is (made when missing). What train writes below
// the job's output/ stays there (a link planted at output/data put metrics.json wherever it pointed).
void make_folders_below(const std::filesystem::path& root, const std::filesystem::path& folder);

// Flushes a directory's entries (after a rename or unlink in it). Throws std::runtime_error on failure.
void sync_directory(const std::string& directory);

// Removes `path.tmp-XXXXXX` files that an earlier, interrupted writer of `path` left behind. Returns how
// many it removed. Errors are ignored: a leftover temporary file is untidy, not wrong.
int remove_stale_temporaries(const std::string& path);

}  // namespace train
