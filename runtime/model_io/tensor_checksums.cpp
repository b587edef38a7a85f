#include "runtime/model_io/tensor_checksums.h"

#include "common/json_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <climits>

namespace train::model_io {

namespace {

std::string crc32_text(const void* data, size_t size) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib takes the length as uInt
    const uInt chunk = static_cast<uInt>(std::min<size_t>(size, UINT_MAX));
    crc = ::crc32(crc, bytes, chunk);
    bytes += chunk;
    size -= chunk;
  }
  return fmt::format("{:08x}", static_cast<uint32_t>(crc));
}

}  // namespace

Metadata with_tensor_checksums(const std::vector<TensorView>& tensors, Metadata metadata) {
  nlohmann::ordered_json sums = nlohmann::ordered_json::object();
  for (const auto& tensor : tensors) sums[tensor.name] = crc32_text(tensor.data, tensor.byte_size());
  metadata[std::string(tensor_checksums_key)] = sums.dump();
  return metadata;
}

void require_tensor_checksums(const SafetensorsFile& file, std::string_view source) {
  if (file.metadata.count(std::string(tensor_checksums_key)) == 0) {
    throw SafetensorsError(fmt::format("{}: the metadata has no \"{}\" (the checksums of its tensors), which every "
                                       "file train writes has: the file is damaged or was not written by train",
                                       source, tensor_checksums_key));
  }
}

void verify_tensor_checksums(const SafetensorsFile& file, std::string_view source) {
  const auto stored = file.metadata.find(std::string(tensor_checksums_key));
  if (stored == file.metadata.end()) return;
  nlohmann::json sums;
  try {
    sums = nlohmann::json::parse(stored->second, json_depth_limited<nlohmann::json>());
  } catch (const nlohmann::json::exception&) {
    sums = nullptr;
  } catch (const JsonTooDeep&) {
    sums = nullptr;
  }
  if (!sums.is_object()) {
    throw SafetensorsError(fmt::format("{}: the metadata's \"{}\" is not a JSON object of checksums: the file is "
                                       "damaged",
                                       source, tensor_checksums_key));
  }
  for (const auto& tensor : file.tensors) {
    const auto sum = sums.find(tensor.name);
    if (sum == sums.end() || !sum->is_string()) {
      throw SafetensorsError(fmt::format("{}: tensor \"{}\" has no checksum in the metadata's \"{}\": the file is "
                                         "damaged",
                                         source, tensor.name, tensor_checksums_key));
    }
    const std::string computed = crc32_text(tensor.data.data(), tensor.data.size());
    if (sum->get<std::string>() != computed) {
      throw SafetensorsError(fmt::format("{}: tensor \"{}\": its bytes do not match the checksum stored with them "
                                         "(CRC-32 stored {}, computed {}): the file is damaged",
                                         source, tensor.name, sum->get<std::string>(), computed));
    }
  }
  if (sums.size() != file.tensors.size()) {
    for (const auto& [name, value] : sums.items()) {
      if (file.find(name) == nullptr) {
        throw SafetensorsError(fmt::format("{}: the metadata has a checksum for tensor \"{}\", which the file does not "
                                           "hold: the file is damaged",
                                           source, name));
      }
    }
  }
}

}  // namespace train::model_io
