// The built-in image classification algorithm's "image list" layout: .lst files (the `train_lst` and
// `validation_lst` channels) of tab-separated lines
//     index <TAB> label [<TAB> more labels ...] <TAB> path relative to the image root
// next to the image files themselves (the `train` and `validation` channels). Labels are written as
// numbers ("3" or "3.000000") and must be whole; with several labels the first is the class.
#pragma once

#include "runtime/data/records/record_index.h"
#include "runtime/data/sources/image_folder.h"
#include "runtime/data/sources/label_summary.h"

#include <string>
#include <vector>

namespace train::data {

// Reads the .lst files (in the order given; lines in file order) into an image list rooted at
// `image_root`: classes are "0", "1", ... up to the largest label. A malformed line goes to `tally`
// (which throws CorruptDataError naming the .lst file and the line's byte offset unless skipping). The
// labels' summary (with the .lst line of the highest) goes to `labels` when given.
ImageFolder read_image_lists(const std::vector<std::string>& lst_paths, const std::string& image_root,
                             CorruptTally& tally, LabelSummary* labels = nullptr);

}  // namespace train::data
