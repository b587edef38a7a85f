// Fetching the code into the code folder: an S3 object or a local archive through fetch_code.py (boto3 and
// Python's tarfile, with the checks that keep every member inside the folder), a local folder copied.
#pragma once

#include "entrypoint/user_code/code_source.h"
#include "entrypoint/user_code/user_code.h"

#include <string>

namespace train::user_code {

// Fills the empty (or absent) code folder from `source` (an S3 object, a local file or folder); returns what
// was done, in a sentence. Throws UserCodeError.
std::string fetch_code(const CodeSource& source, const std::filesystem::path& code_folder,
                       const CodeSettings& settings);

}  // namespace train::user_code
