#include "runtime/data/sources/data_channel.h"

#include "runtime/data/data_error.h"
#include "runtime/data/records/byte_stream.h"
#include "runtime/data/records/recordio.h"
#include "runtime/data/records/tfrecord.h"
#include "runtime/data/sources/corrupt_skipping_source.h"
#include "runtime/data/sources/image_list.h"
#include "runtime/data/sources/record_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <system_error>

namespace train::data {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

bool has_suffix(const std::string& name, std::string_view suffix) {
  return name.size() >= suffix.size() && lower(name).compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool tfrecord_name(const std::string& name) {
  const std::string l = lower(name);
  return l.find(".tfrecord") != std::string::npos || l.find(".tfrec") != std::string::npos;
}

// The first 12 bytes (inflated when gzip) frame a TFRecord.
bool starts_like_tfrecord(const std::string& path) {
  try {
    auto stream = open_maybe_gzipped(path);
    uint8_t header[kTfRecordHeaderBytes];
    return looks_like_tfrecord(header, stream->read_fully(header, sizeof header));
  } catch (const DataError&) {
    return false;  // unreadable or damaged: not evidence of the format
  }
}

struct Listing {
  std::vector<std::string> files;    // full paths, sorted
  std::vector<std::string> folders;  // names, sorted
};

Listing list_folder(const std::string& root) {
  std::error_code error;
  const auto status = fs::status(root, error);
  if (error || !fs::exists(status)) throw DataError(fmt::format("data channel {}: does not exist", root));
  if (!fs::is_directory(status)) throw DataError(fmt::format("data channel {}: is not a folder", root));
  Listing listing;
  fs::directory_iterator it(root, error);
  for (; !error && it != fs::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.front() == '.') continue;
    std::error_code kind_error;
    if (fs::is_directory(it->path(), kind_error)) {
      listing.folders.push_back(name);
    } else if (fs::is_regular_file(it->path(), kind_error)) {
      listing.files.push_back(it->path().string());
    }
  }
  if (error) throw DataError(fmt::format("data channel {}: cannot list it: {}", root, error.message()));
  std::sort(listing.files.begin(), listing.files.end());
  std::sort(listing.folders.begin(), listing.folders.end());
  return listing;
}

std::vector<std::string> with_suffix(const std::vector<std::string>& files, std::string_view suffix) {
  std::vector<std::string> found;
  for (const auto& file : files) {
    if (has_suffix(file, suffix)) found.push_back(file);
  }
  return found;
}

std::string some_names(const Listing& listing) {
  std::string names;
  int shown = 0;
  for (const auto& file : listing.files) {
    if (shown++ == 5) break;
    names += (names.empty() ? "" : ", ") + fs::path(file).filename().string();
  }
  return names.empty() ? "nothing" : fmt::format("{} file{} ({}{})", listing.files.size(),
                                                 listing.files.size() == 1 ? "" : "s", names,
                                                 listing.files.size() > 5 ? ", ..." : "");
}

ChannelLayout recordio_layout(const std::string& root, const std::vector<std::string>& recs) {
  ChannelLayout layout{DataFormat::recordio, root, recs, {}, ""};
  int with_idx = 0;
  for (const auto& rec : recs) {
    const std::string idx = rec.substr(0, rec.size() - 4) + ".idx";
    std::error_code error;
    const bool exists = fs::is_regular_file(idx, error);
    layout.idx_files.push_back(exists ? idx : "");
    with_idx += exists ? 1 : 0;
  }
  layout.why = fmt::format("{} .rec file{} ({} with .idx)", recs.size(), recs.size() == 1 ? "" : "s", with_idx);
  return layout;
}

ChannelLayout tfrecord_layout(const std::string& root, const Listing& listing, bool required) {
  ChannelLayout layout{DataFormat::tfrecord, root, {}, {}, ""};
  size_t ignored = 0;
  for (const auto& file : listing.files) {
    const std::string name = fs::path(file).filename().string();
    if (has_suffix(name, ".idx") || has_suffix(name, ".lst")) {
      ++ignored;
    } else if (tfrecord_name(name) || starts_like_tfrecord(file)) {
      layout.files.push_back(file);  // a damaged *.tfrecord is still ours: indexing reports it
    } else {
      ++ignored;
    }
  }
  if (layout.files.empty() && required) {
    throw DataError(fmt::format("data channel {}: data_format is tfrecord but no file here starts like a TFRecord "
                                "(8-byte length and its masked CRC-32C, plain or gzip); found {}",
                                root, some_names(listing)));
  }
  layout.why = fmt::format("{} TFRecord file{}{}", layout.files.size(), layout.files.size() == 1 ? "" : "s",
                           ignored > 0 ? fmt::format(" ({} other files ignored)", ignored) : "");
  return layout;
}

}  // namespace

ChannelLayout detect_channel_layout(const std::string& root, const std::optional<std::string>& list_root,
                                    DataFormat requested) {
  if (requested == DataFormat::synthetic) throw std::invalid_argument("synthetic data has no channel to detect");
  const Listing listing = list_folder(root);
  const bool detect = requested == DataFormat::detect;

  if ((detect || requested == DataFormat::image_list) && (list_root || requested == DataFormat::image_list)) {
    const std::string lists_at = list_root.value_or(root);
    const auto lsts = with_suffix(list_root ? list_folder(*list_root).files : listing.files, ".lst");
    if (lsts.empty()) {
      throw DataError(fmt::format("data channel {}: expected .lst files (index<TAB>label<TAB>path lines) for the "
                                  "image list layout, found none; add them or choose another data_format",
                                  lists_at));
    }
    return ChannelLayout{DataFormat::image_list, root, lsts, {},
                         fmt::format("{} .lst file{} in {}", lsts.size(), lsts.size() == 1 ? "" : "s", lists_at)};
  }
  if (detect || requested == DataFormat::recordio) {
    const auto recs = with_suffix(listing.files, ".rec");
    if (!recs.empty()) return recordio_layout(root, recs);
    if (!detect) {
      throw DataError(fmt::format("data channel {}: data_format is recordio but there is no .rec file here; found {}",
                                  root, some_names(listing)));
    }
  }
  if (detect) {
    const auto lsts = with_suffix(listing.files, ".lst");
    if (!lsts.empty()) {
      return ChannelLayout{DataFormat::image_list, root, lsts, {},
                           fmt::format("{} .lst file{}", lsts.size(), lsts.size() == 1 ? "" : "s")};
    }
  }
  if (detect || requested == DataFormat::tfrecord) {
    ChannelLayout layout = tfrecord_layout(root, listing, !detect);
    if (!layout.files.empty()) return layout;
  }
  if (detect || requested == DataFormat::image_folder) {
    if (!listing.folders.empty() || !detect) {
      return ChannelLayout{DataFormat::image_folder, root, {}, {},
                           fmt::format("{} class subfolder{}", listing.folders.size(), listing.folders.size() == 1 ? "" : "s")};
    }
  }
  throw DataError(fmt::format(
      "data channel {}: cannot tell the data's format: expected class subfolders of JPEG/PNG files, TFRecord "
      "shards (*.tfrecord, plain or gzip), MXNet RecordIO (*.rec with optional *.idx) or an image list (*.lst); "
      "found {}. Put the data in one of these layouts, or set the data_format hyperparameter",
      root, some_names(listing)));
}

std::optional<std::string> renumber_classes(ImageFolder& folder, const std::vector<std::string>& classes) {
  std::map<std::string, int32_t> label_of;
  for (size_t i = 0; i < classes.size(); ++i) label_of[classes[i]] = static_cast<int32_t>(i);
  std::vector<int32_t> remap;
  for (const auto& name : folder.classes) {
    auto found = label_of.find(name);
    if (found == label_of.end()) return name;
    remap.push_back(found->second);
  }
  for (auto& label : folder.labels) label = remap[static_cast<size_t>(label)];
  folder.classes = classes;
  return std::nullopt;
}

ImageFolder align_validation_classes(ImageFolder validation, const std::vector<std::string>& training_classes) {
  if (const auto missing = renumber_classes(validation, training_classes)) {
    throw DataError(fmt::format("validation class \"{}\" (folder {}/{}) is not a class of the training data; "
                                "validation classes must be training classes",
                                *missing, validation.root, *missing));
  }
  return validation;
}

OpenedData open_channel(const std::string& root, const std::optional<std::string>& list_root, DataFormat requested,
                        const DataOptions& options, const OpenedData* training) {
  OpenedData opened;
  opened.layout = detect_channel_layout(root, list_root, requested);
  if (options.agree_on_format) options.agree_on_format(opened.layout);
  std::shared_ptr<const SampleSource> source;
  switch (opened.layout.format) {
    case DataFormat::image_folder: {
      ImageFolder folder = options.share_folder
                               ? rooted_at(options.share_folder([&] { return scan_image_folder(root); }), root)
                               : scan_image_folder(root);
      if (options.join_classes) {
        const std::vector<std::string> job_classes = options.join_classes(folder.classes);
        if (const auto missing = renumber_classes(folder, job_classes)) {
          throw std::logic_error(fmt::format("the job's classes lack this host's class \"{}\"", *missing));
        }
      }
      if (training != nullptr && !training->class_names.empty()) {
        folder = align_validation_classes(std::move(folder), training->class_names);
      }
      opened.class_names = folder.classes;
      for (const int32_t label : folder.labels) {
        opened.labels.add(label, [&] { return fmt::format("{}/{}", root, folder.classes[static_cast<size_t>(label)]); });
      }
      auto images = std::make_shared<ImageFolderSource>(std::move(folder), options.image);
      opened.folder = std::shared_ptr<const ImageFolder>(images, &images->folder());  // not a copy of a million paths
      source = std::move(images);
      break;
    }
    case DataFormat::image_list: {
      CorruptTally tally(options.skip_corrupt);
      ImageFolder list = read_image_lists(opened.layout.files, root, tally, &opened.labels);
      opened.corrupt_at_open = tally.count();
      opened.corrupt_notes = tally.notes();
      auto images = std::make_shared<ImageFolderSource>(std::move(list), options.image);
      opened.folder = std::shared_ptr<const ImageFolder>(images, &images->folder());
      source = std::move(images);
      break;
    }
    case DataFormat::tfrecord:
    case DataFormat::recordio: {
      const ChannelLayout& layout = opened.layout;
      const auto build = [&]() -> RecordIndex {
        return layout.format == DataFormat::tfrecord
                   ? index_tfrecord_files(root, layout.files, TfRecordOptions{options.tfrecord_label_offset},
                                          options.skip_corrupt)
                   : index_recordio_files(root, layout.files, layout.idx_files, options.skip_corrupt);
      };
      RecordIndex index = options.share_index ? options.share_index(build) : build();
      // Inflated shards are read through open descriptors from here on; with no other process to wait for
      // (share_index releases them itself once the host's ranks hold them), their folder goes now.
      hold_temporary_files(index);
      if (!options.share_index) index.inflated.reset();
      for (const auto& entry : index.entries) {
        opened.labels.add(entry.label, [&] { return index.record_name(entry); });
      }
      opened.corrupt_at_open = index.corrupt_skipped;
      opened.corrupt_notes = index.corrupt_notes;
      source = std::make_shared<RecordSource>(std::move(index), options.image);
      break;
    }
    case DataFormat::detect:
    case DataFormat::synthetic: throw std::logic_error("detect_channel_layout returned no format");
  }
  opened.source = options.skip_corrupt ? std::make_shared<CorruptSkippingSource>(source) : source;
  return opened;
}

}  // namespace train::data
