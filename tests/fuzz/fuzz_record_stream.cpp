// libFuzzer target for Pipe mode's stream reader: any bytes are read as one FIFO stream (format detected
// from its first bytes, gzip inflated, RecordIO wrappers unwrapped when the first input byte says so,
// corrupt records skipped when it says so). Every record returned must carry an image inside the stream's
// decoded bytes' bounds and a label below num_classes.
#include "runtime/data/records/byte_stream.h"
#include "runtime/data/records/record_stream.h"
#include "tests/fuzz/fuzz_data_common.h"

#include <memory>

using namespace train::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  StreamRecordOptions options;
  options.unwrap_recordio = (data[0] & 1) != 0;
  options.skip_corrupt = (data[0] & 2) != 0;
  options.num_classes = (data[0] & 4) != 0 ? 1000 : 0;
  options.tfrecord_label_offset = (data[0] & 8) != 0 ? 0 : 1;
  fuzz::expect_only_data_errors("fuzz_record_stream", [&] {
    StreamRecordReader reader(std::make_unique<MemoryStream>(data + 1, size - 1, "fuzz.stream"), options);
    StreamRecord record;
    for (int records = 0; records < 10000 && reader.next(record); ++records) {
      if (record.label < 0) fuzz::bug("fuzz_record_stream", "a negative label");
      if (options.num_classes > 0 && record.label >= options.num_classes) fuzz::bug("fuzz_record_stream", "label >= num_classes");
    }
  });
  return 0;
}
