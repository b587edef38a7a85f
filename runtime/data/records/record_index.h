// The index of a record-format data set: every usable record's place (file, byte offset, length) and
// label, built by scanning the files once at start-up (or read from a RecordIO .idx), so that sample i is
// addressable by index exactly like an image folder's file i: the sampler, sharding and exact resume work
// unchanged. Also the tally of corrupt records found while indexing.
#pragma once

#include "common/non_copyable.h"
#include "common/owned_folder.h"
#include "runtime/data/data_error.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace train::data {

struct RecordFile {
  std::string path;        // what is read (for a gzip shard: its uncompressed copy)
  std::string name;        // what messages call it (the user's file)
  bool temporary = false;  // an inflated copy in a TempFolder: read through HeldFiles once it is opened
};

struct RecordEntry {
  uint32_t file = 0;    // into RecordIndex::files
  uint64_t offset = 0;  // where the record's framing starts
  uint64_t length = 0;  // bytes of framing and data, through the last part's padding
  int32_t label = 0;    // 0-based class
};

// Corrupt records met so far: with skip_corrupt they are counted (the first few described for the log);
// without it the first one is thrown.
class CorruptTally {
 public:
  explicit CorruptTally(bool skip) : skip_(skip) {}
  // Throws `error` unless skipping; else counts it.
  void add(const CorruptDataError& error);
  // Adds what `later` (a tally of data after this one's) counted, as if this tally had met it.
  void add_all(const CorruptTally& later);
  bool skipping() const { return skip_; }
  int64_t count() const { return count_; }
  const std::vector<std::string>& notes() const { return notes_; }  // the first 20, as messages

 private:
  bool skip_;
  int64_t count_ = 0;
  std::vector<std::string> notes_;
};

// A folder made for this process and removed with everything in it when the last owner lets go: where
// gzip-compressed shards are inflated so that their records can be read by offset
// ($TMPDIR/train-records-PID-XXXXXX, an OwnedFolder): making one also removes the folders of processes that
// have ended (killed before they could remove theirs).
class TempFolder {
 public:
  TempFolder();
  const std::filesystem::path& path() const { return folder_.path(); }

 private:
  OwnedFolder folder_;
};

// Open descriptors of an index's temporary files, by file number (-1 for the others). The files stay
// readable through them after their folder is removed, which every host removes as soon as all its ranks
// have opened them: then nothing is left on the disk however a rank ends (a SIGKILL included), since the
// kernel frees the space with the last descriptor.
class HeldFiles : private NonCopyable {
 public:
  explicit HeldFiles(const std::vector<RecordFile>& files);  // throws DataError naming a file it cannot open
  ~HeldFiles();
  int fd(uint32_t file) const { return file < fds_.size() ? fds_[file] : -1; }

 private:
  std::vector<int> fds_;
};

enum class RecordFormat { tfrecord, recordio };

struct RecordIndex {
  RecordFormat format = RecordFormat::tfrecord;
  std::string root;                    // the channel folder, for messages
  std::vector<RecordFile> files;
  std::vector<RecordEntry> entries;    // dataset order: files in sorted order, records in file order
  int num_classes = 0;                 // the largest label + 1
  int64_t corrupt_skipped = 0;         // found while indexing (skip_corrupt=true)
  std::vector<std::string> corrupt_notes;
  std::shared_ptr<TempFolder> inflated;  // keeps inflated gzip shards alive (until they are held)
  std::shared_ptr<HeldFiles> held;       // the temporary files, open (hold_temporary_files)

  int64_t size() const { return static_cast<int64_t>(entries.size()); }
  // What the index holds in memory, from its containers' capacities (file names included).
  int64_t bytes() const;
  // A record as messages name it: "FILE, byte offset N".
  std::string record_name(const RecordEntry& entry) const;
};

// Opens the index's temporary files into `index.held` (once; nothing to do without temporary files). After
// every process reading them has done so, the TempFolder can go: release it with `index.inflated.reset()`.
void hold_temporary_files(RecordIndex& index);

// The index as bytes and back, so that one process per host can build it and hand it to the others
// (every rank scanning every file would read the data set once per rank). `inflated` does not travel:
// the builder keeps its inflated shards alive. Parsing throws DataError on bytes it did not write.
std::string serialize_record_index(const RecordIndex& index);
RecordIndex parse_record_index(const std::string& bytes);

}  // namespace train::data
