// Which format a channel's folder holds, and the sample source that reads it. Detection looks at the
// entries directly in the folder (record files are expected there, as SageMaker copies an S3 prefix):
//   1. a companion .lst channel (train_lst / validation_lst) -> image list (images in this channel)
//   2. *.rec files                                            -> MXNet RecordIO (each with X.idx if present)
//   3. *.lst files                                            -> image list rooted at this folder
//   4. files that start like a TFRecord (plain or gzip), or are named *.tfrecord* / *.tfrec*  -> TFRecord
//   5. subfolders                                             -> image folder (one subfolder per class)
// The data_format hyperparameter (DataFormat, typed by the job: job/training_choices.h) picks one of them
// instead of detecting.
#pragma once

#include "job/training_choices.h"
#include "runtime/data/records/record_index.h"
#include "runtime/data/sources/image_folder.h"
#include "runtime/data/sources/label_summary.h"
#include "runtime/data/sources/sample_source.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace train::data {

struct ChannelLayout {
  DataFormat format = DataFormat::image_folder;
  std::string root;                    // the channel folder (for an image list: where the images are)
  std::vector<std::string> files;      // record or .lst files, sorted by name
  std::vector<std::string> idx_files;  // RecordIO: the .idx of files[i], or "" when there is none
  std::string why;                     // what detection saw, for the log
};

// Decides the layout of the channel folder `root` (with `list_root`, the .lst channel's folder, when the
// job has one). Throws DataError naming the folder, what was expected and what was found.
ChannelLayout detect_channel_layout(const std::string& root, const std::optional<std::string>& list_root,
                                    DataFormat requested);

struct DataOptions {
  ImageFolderOptions image;          // input size, augmentation
  int64_t tfrecord_label_offset = 1;
  bool skip_corrupt = false;
  // How a record index is built: by default here, by this process. The trainer passes a function that
  // calls `build` on one rank per host and hands the result to the host's other ranks, so that the
  // files are scanned once per host. It must rethrow (on every rank) what `build` threw.
  std::function<RecordIndex(const std::function<RecordIndex()>& build)> share_index;
  // The same for an image folder's scan (a walk of every file): the trainer's scans it once and hands the
  // result on. It must rethrow (on every rank) what `build` threw.
  std::function<ImageFolder(const std::function<ImageFolder()>& build)> share_folder;
  // ShardedByS3Key on several hosts, where each host holds its own part of the objects (both collective; unset:
  // this host alone decides). `agree_on_format` is told the layout this host found and throws, on every rank,
  // when another host's format differs. `join_classes` is given an image folder's class subfolders here and
  // returns the job's (every host's, sorted), so that a label stands for one class name on every host: a host
  // whose part lacks a class would otherwise number every class after it differently.
  std::function<void(const ChannelLayout& layout)> agree_on_format;
  std::function<std::vector<std::string>(const std::vector<std::string>& mine)> join_classes;
};

struct OpenedData {
  std::shared_ptr<const SampleSource> source;  // wrapped in a CorruptSkippingSource when skipping
  ChannelLayout layout;
  std::shared_ptr<const ImageFolder> folder;   // image folders and lists: their files and classes (the source's)
  std::vector<std::string> class_names;        // image folders: subfolder names; otherwise empty
  int64_t corrupt_at_open = 0;                 // corrupt records skipped while indexing
  std::vector<std::string> corrupt_notes;      // the first of them, described
  LabelSummary labels;                         // every sample's label, summed up
};

// Opens a channel for training (or, with `training` given, for validation: an image folder's classes
// are then mapped to the training data's class names).
OpenedData open_channel(const std::string& root, const std::optional<std::string>& list_root, DataFormat requested,
                        const DataOptions& options, const OpenedData* training = nullptr);

// Validation labels follow the training data's class names, not the validation folder's own order.
ImageFolder align_validation_classes(ImageFolder validation, const std::vector<std::string>& training_classes);

// `folder` with `classes` as its classes, each label renumbered to its class name's place there; the first of the
// folder's class names missing from `classes`, if any, instead (the folder unchanged).
std::optional<std::string> renumber_classes(ImageFolder& folder, const std::vector<std::string>& classes);

}  // namespace train::data
