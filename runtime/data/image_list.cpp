#include "runtime/data/image_list.h"

#include "runtime/data/recordio.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace train::data {

namespace {

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
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DataError(fmt::format("{}: cannot open for reading", path));
    std::string line;
    uint64_t line_offset = 0;
    while (std::getline(in, line)) {
      const uint64_t offset = line_offset;
      line_offset += line.size() + 1;
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
        list.paths.push_back((std::filesystem::path(image_root) / relative).string());
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
