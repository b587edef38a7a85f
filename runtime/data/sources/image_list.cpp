#include "runtime/data/sources/image_list.h"

#include "common/regular_file.h"
#include "runtime/data/records/byte_stream.h"
#include "runtime/data/records/recordio.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace train::data {

namespace {

// The lines of a .lst file, read through FileStream (a regular file only) and handed out one at a time.
class LineReader {
 public:
  explicit LineReader(const std::string& path) : stream_(path) {}
  // The next line without its '\n', and the byte offset where it starts; false at the end.
  bool next(std::string& line, uint64_t& offset) {
    for (;;) {
      const size_t newline = buffer_.find('\n', begin_);
      if (newline != std::string::npos || ended_) {
        if (begin_ >= buffer_.size() && ended_) return false;
        const size_t end = newline == std::string::npos ? buffer_.size() : newline;
        line.assign(buffer_, begin_, end - begin_);
        offset = buffer_offset_ + begin_;
        begin_ = newline == std::string::npos ? buffer_.size() : newline + 1;
        return true;
      }
      buffer_offset_ += begin_;
      buffer_.erase(0, begin_);
      begin_ = 0;
      const size_t before = buffer_.size();
      buffer_.resize(before + kChunk);
      const size_t got = stream_.read(reinterpret_cast<uint8_t*>(buffer_.data() + before), kChunk);
      buffer_.resize(before + got);
      ended_ = got == 0;
    }
  }

 private:
  static constexpr size_t kChunk = size_t{1} << 16;
  FileStream stream_;
  std::string buffer_;
  size_t begin_ = 0;
  uint64_t buffer_offset_ = 0;  // the file offset of buffer_[0]
  bool ended_ = false;
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

}  // namespace

ImageFolder read_image_lists(const std::vector<std::string>& lst_paths, const std::string& image_root,
                             CorruptTally& tally, LabelSummary* labels) {
  ImageFolder list;
  list.root = image_root;
  list.kind = "image list";
  int32_t largest = -1;
  for (const auto& path : lst_paths) {
    LineReader in(path);
    std::string line;
    uint64_t offset = 0;
    while (in.next(line, offset)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      try {
        const auto fields = split_tabs(line);
        if (fields.size() < 3 || fields.back().empty()) {
          throw CorruptDataError(path, offset,
                                 fmt::format("expected \"index<TAB>label<TAB>relative/path.jpg\", found \"{}\"", line.substr(0, 120)));
        }
        const std::string& label_text = fields[1];
        char* end = nullptr;
        const double label = std::strtod(label_text.c_str(), &end);
        if (label_text.empty() || end == nullptr || *end != '\0') {
          throw CorruptDataError(path, offset, fmt::format("the label \"{}\" is not a number", label_text.substr(0, 40)));
        }
        const int32_t cls = class_from_float_label(label, path, offset);
        const std::filesystem::path relative(fields.back());
        const bool climbs = std::any_of(relative.begin(), relative.end(), [](const auto& part) { return part == ".."; });
        if (relative.is_absolute() || climbs) {
          throw CorruptDataError(path, offset,
                                 fmt::format("the image path \"{}\" must be relative to the image channel, without ..", fields.back()));
        }
        std::string image = (std::filesystem::path(image_root) / relative).string();
        // One stat per line: a FIFO, a device (/dev/zero), a socket or a folder is named here with its line,
        // not read (image folders leave such entries out). Opening the image checks again.
        struct stat status {};
        if (::stat(image.c_str(), &status) == 0 && !S_ISREG(status.st_mode)) {
          throw CorruptDataError(path, offset,
                                 fmt::format("the image path \"{}\" names {}, not a regular file", fields.back(),
                                             file_type_name(status.st_mode)));
        }
        list.paths.push_back(std::move(image));
        list.labels.push_back(cls);
        largest = std::max(largest, cls);
        if (labels) labels->add(cls, [&] { return fmt::format("{}, byte offset {}", path, offset); });
      } catch (const CorruptDataError& error) {
        tally.add(error);
      }
    }
  }
  for (int32_t c = 0; c <= largest; ++c) list.classes.push_back(std::to_string(c));
  return list;
}

}  // namespace train::data
