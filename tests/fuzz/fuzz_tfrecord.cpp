// libFuzzer target for TFRecord framing: any bytes (inflated first when they start like gzip) are indexed
// as a TFRecord stream, failing and skipping; every record the index accepts must check out again when
// read back from memory by its offset and length, as RecordSource does.
#include "runtime/data/records/byte_stream.h"
#include "runtime/data/records/tfrecord.h"
#include "tests/fuzz/fuzz_data_common.h"

#include <memory>
#include <vector>

using namespace train::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> plain(data, data + size);
  if (looks_gzipped(data, size)) {
    plain.clear();
    fuzz::expect_only_data_errors("fuzz_tfrecord gzip", [&] {
      GzipStream gzip(std::make_unique<MemoryStream>(data, size, "fuzz.gz"));
      uint8_t buffer[4096];
      for (size_t got; (got = gzip.read(buffer, sizeof buffer)) > 0 && plain.size() < (1u << 20);) {
        plain.insert(plain.end(), buffer, buffer + got);
      }
    });
  }
  for (const bool skip : {false, true}) {
    std::vector<RecordEntry> entries;
    fuzz::expect_only_data_errors("fuzz_tfrecord index", [&] {
      MemoryStream stream(plain.data(), plain.size(), "fuzz.tfrecord");
      CorruptTally tally(skip);
      index_tfrecord_stream(stream, 0, TfRecordOptions{0}, entries, tally);
    });
    for (const auto& entry : entries) {
      if (entry.offset > plain.size() || entry.length > plain.size() - entry.offset) {
        fuzz::bug("fuzz_tfrecord", "an indexed record lies outside the stream");
      }
      try {
        (void)check_tfrecord(plain.data() + entry.offset, static_cast<size_t>(entry.length), "fuzz", entry.offset);
      } catch (const CorruptDataError& error) {
        fuzz::bug("fuzz_tfrecord", std::string("an indexed record fails its check: ") + error.what());
      }
    }
  }
  return 0;
}
