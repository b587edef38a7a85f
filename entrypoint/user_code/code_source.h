// What `sagemaker_submit_directory` names, as the toolkit's files.download_and_extract tells it apart: an S3
// object (the SDK's s3://BUCKET/KEY/sourcedir.tar.gz), a local folder (the code folder itself in the SDK's
// local mode), or a local file (a .tar.gz: /opt/ml/input/data/code/sourcedir.tar.gz under network isolation).
#pragma once

#include "common/paths.h"

#include <filesystem>
#include <string>

namespace train::user_code {

enum class SourceKind {
  code_folder,   // the code folder itself (or nothing named): nothing to fetch
  local_folder,  // another local folder: copied
  local_file,    // a local archive: unpacked
  s3_object,     // downloaded, then unpacked
};

struct CodeSource {
  SourceKind kind = SourceKind::code_folder;
  std::string given;           // as the job named it
  std::filesystem::path path;  // the local folder or file (relocated: below); empty for S3
};

// What `submit_directory` names. A local path must be absolute and exist; under a relocated /opt/ml
// (SAGEMAKER_BASE_DIR) a path below /opt/ml is taken below the job's own folder, as the checkpoint and
// TensorBoard paths are (job/output_locations.cpp). Throws UserCodeError (exit 65) naming what was expected.
CodeSource classify_code_source(const std::string& submit_directory, const JobPaths& paths);

}  // namespace train::user_code
