// libFuzzer target for the protobuf reader and tf.train.Example parsing: any bytes either parse, with the
// image inside the input, or throw ProtobufError.
#include "runtime/data/records/tf_example.h"
#include "tests/fuzz/fuzz_data_common.h"

using namespace train::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_only_data_errors("fuzz_tf_example", [&] {
    const ExampleImage example = parse_example_image(data, size);
    if (example.image < data || example.image_size > size || example.image + example.image_size > data + size) {
      fuzz::bug("fuzz_tf_example", "the image lies outside the Example");
    }
  });
  return 0;
}
