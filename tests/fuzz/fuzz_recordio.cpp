// libFuzzer target for MXNet RecordIO: any bytes are read as a RecordIO stream (reassembling multi-part
// records, resynchronising after damage, parsing image headers); every record found must read back the
// same from its own extent, as RecordSource reads it by offset.
#include "runtime/data/records/byte_stream.h"
#include "runtime/data/records/recordio.h"
#include "tests/fuzz/fuzz_data_common.h"

#include <vector>

using namespace train::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MemoryStream stream(data, size, "fuzz.rec");
  RecordIoReader reader(stream);
  std::vector<uint8_t> record, again;
  for (int records = 0; records < 10000; ++records) {
    uint64_t offset = 0;
    bool got = false;
    fuzz::expect_only_data_errors("fuzz_recordio next", [&] { got = reader.next(record, offset); });
    if (!got) {
      bool found = false;
      fuzz::expect_only_data_errors("fuzz_recordio resync", [&] { found = reader.resync(); });
      if (!found) break;
      continue;
    }
    const uint64_t end = stream.offset();
    if (offset > end || end > size) fuzz::bug("fuzz_recordio", "a record's extent lies outside the stream");
    fuzz::expect_only_data_errors("fuzz_recordio reread", [&] {
      MemoryStream extent(data + offset, static_cast<size_t>(end - offset), "fuzz.rec", offset);
      RecordIoReader single(extent);
      uint64_t start = 0;
      if (!single.next(again, start) || again != record || start != offset) {
        fuzz::bug("fuzz_recordio", "a record reads back differently from its extent");
      }
    });
    fuzz::expect_only_data_errors("fuzz_recordio header", [&] {
      const RecordIoImage image = parse_recordio_image(record.data(), record.size(), "fuzz.rec", offset);
      if (image.image_size > record.size() || image.image < record.data()) fuzz::bug("fuzz_recordio", "image outside record");
      (void)class_from_float_label(image.label, "fuzz.rec", offset);
    });
  }
  return 0;
}
