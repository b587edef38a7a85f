#include "runtime/data/records/tf_example.h"

#include "runtime/data/records/protobuf_reader.h"

#include <fmt/format.h>

#include <string_view>
#include <vector>

namespace train::data {

namespace {

// Field numbers of tensorflow/core/example/{example,feature}.proto.
constexpr uint32_t kExampleFeatures = 1;
constexpr uint32_t kFeaturesFeature = 1;
constexpr uint32_t kEntryKey = 1;
constexpr uint32_t kEntryValue = 2;
constexpr uint32_t kFeatureBytesList = 1;
constexpr uint32_t kFeatureFloatList = 2;
constexpr uint32_t kFeatureInt64List = 3;
constexpr uint32_t kListValue = 1;

struct FoundFeature {
  bool present = false;
  ProtoField value;  // the Feature message (empty when the entry has no value)
  size_t entry_offset = 0;
};

const char* kind_name(uint32_t number) {
  switch (number) {
    case kFeatureBytesList: return "bytes_list";
    case kFeatureFloatList: return "float_list";
    case kFeatureInt64List: return "int64_list";
  }
  return "an unknown kind";
}

// The Feature's kind (last one set wins, as a oneof) and its list message.
bool feature_list(const ProtoField& feature, uint32_t& kind, ProtoField& list) {
  bool found = false;
  if (feature.data == nullptr) return false;
  ProtoReader reader = ProtoReader::nested(feature);
  ProtoField field;
  while (reader.next(field)) {
    if (field.type == WireType::length_delimited &&
        (field.number == kFeatureBytesList || field.number == kFeatureFloatList || field.number == kFeatureInt64List)) {
      kind = field.number;
      list = field;
      found = true;
    }
  }
  return found;
}

[[noreturn]] void wrong_shape(const FoundFeature& feature, const char* key, const char* expected, const std::string& found) {
  throw ProtobufError(feature.entry_offset, fmt::format("feature {} holds {}; expected {}", key, found, expected));
}

}  // namespace

ExampleImage parse_example_image(const uint8_t* data, size_t size) {
  FoundFeature image, label;
  std::vector<std::string> other_keys;
  ProtoReader example(data, size);
  ProtoField features_field;
  while (example.next(features_field)) {
    if (features_field.number != kExampleFeatures || features_field.type != WireType::length_delimited) continue;
    ProtoReader features = ProtoReader::nested(features_field);
    ProtoField entry_field;
    while (features.next(entry_field)) {
      if (entry_field.number != kFeaturesFeature || entry_field.type != WireType::length_delimited) continue;
      std::string_view key;
      ProtoField value;
      ProtoReader entry = ProtoReader::nested(entry_field);
      ProtoField field;
      while (entry.next(field)) {
        if (field.type != WireType::length_delimited) continue;
        if (field.number == kEntryKey) key = std::string_view(reinterpret_cast<const char*>(field.data), field.size);
        if (field.number == kEntryValue) value = field;
      }
      FoundFeature* target = key == kImageKey ? &image : key == kLabelKey ? &label : nullptr;
      if (target != nullptr) {
        *target = FoundFeature{true, value, entry_field.offset};
      } else if (other_keys.size() < 8) {
        other_keys.emplace_back(key);
      }
    }
  }
  auto missing = [&](const char* key) {
    std::string keys;
    for (const auto& k : other_keys) keys += (keys.empty() ? "" : ", ") + k;
    throw ProtobufError(0, fmt::format("the tf.train.Example has no feature {} (expected features {} and {}; found {})",
                                       key, kImageKey, kLabelKey, keys.empty() ? "no other features" : keys));
  };
  if (!image.present) missing(kImageKey);
  if (!label.present) missing(kLabelKey);

  ExampleImage result;
  uint32_t kind = 0;
  ProtoField list;
  if (!feature_list(image.value, kind, list)) wrong_shape(image, kImageKey, "one bytes value", "no list");
  if (kind != kFeatureBytesList) wrong_shape(image, kImageKey, "one bytes value", kind_name(kind));
  {
    int count = 0;
    ProtoReader values = ProtoReader::nested(list);
    ProtoField field;
    while (values.next(field)) {
      if (field.number != kListValue || field.type != WireType::length_delimited) continue;
      result.image = field.data;
      result.image_size = field.size;
      ++count;
    }
    if (count != 1) wrong_shape(image, kImageKey, "one bytes value", fmt::format("{} values", count));
  }

  if (!feature_list(label.value, kind, list)) wrong_shape(label, kLabelKey, "one int64 value", "no list");
  if (kind != kFeatureInt64List) wrong_shape(label, kLabelKey, "one int64 value", kind_name(kind));
  {
    std::vector<uint64_t> values;
    ProtoReader reader = ProtoReader::nested(list);
    ProtoField field;
    while (reader.next(field)) {
      if (field.number != kListValue) continue;
      if (field.type == WireType::varint) values.push_back(field.value);
      if (field.type == WireType::length_delimited) read_packed_varints(field, values);
    }
    if (values.size() != 1) wrong_shape(label, kLabelKey, "one int64 value", fmt::format("{} values", values.size()));
    result.label = static_cast<int64_t>(values[0]);
  }
  return result;
}

}  // namespace train::data
