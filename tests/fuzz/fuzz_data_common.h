// Shared by the data-format fuzz targets: the only acceptable answers to bad bytes are DataError (which
// includes CorruptDataError) and ProtobufError, each with a non-empty message; anything else, a crash or
// a sanitizer report is a bug.
#pragma once

#include "runtime/data/data_error.h"
#include "runtime/data/records/protobuf_reader.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace fuzz {

[[noreturn]] inline void bug(const char* target, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", target, detail.c_str());
  std::abort();
}

template <typename Run>
void expect_only_data_errors(const char* target, Run&& run) {
  try {
    run();
  } catch (const train::data::DataError& error) {
    if (std::string(error.what()).empty()) bug(target, "empty DataError message");
  } catch (const train::data::ProtobufError& error) {
    if (std::string(error.what()).empty()) bug(target, "empty ProtobufError message");
  } catch (const std::exception& error) {
    bug(target, std::string("unexpected exception: ") + error.what());
  } catch (...) {
    bug(target, "unexpected non-standard exception");
  }
}

}  // namespace fuzz
