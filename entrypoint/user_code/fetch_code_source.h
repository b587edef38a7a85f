// fetch_code.py's text, built into train (the build generates its definition from the file), so that nothing
// has to be found beside the executable: train runs it as `python3 -I -c TEXT ...`.
#pragma once

#include <string_view>

namespace train::user_code {

std::string_view fetch_code_source();

}  // namespace train::user_code
