// The two features of a tf.train.Example that image classification needs, found by walking its
// protobuf bytes (Example.features = 1 -> Features.feature = 1, a map<string, Feature> -> Feature.bytes_list
// = 1 / int64_list = 3 -> value = 1). Unknown fields are skipped, later map entries win over earlier ones
// (protobuf's merge rule), and int64 values may be packed or not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace train::data {

inline constexpr const char* kImageKey = "image/encoded";
inline constexpr const char* kLabelKey = "image/class/label";

struct ExampleImage {
  const uint8_t* image = nullptr;  // points into the Example's bytes
  size_t image_size = 0;
  int64_t label = 0;               // as stored (the usual ImageNet scripts write 1-based labels)
};

// Throws ProtobufError (offset within the Example, reason) when the bytes are not an Example or when
// either feature is missing, of another type, or does not hold exactly one value.
ExampleImage parse_example_image(const uint8_t* data, size_t size);

}  // namespace train::data
