// Writers of the record formats for the data tests: tf.train.Example protobufs, TFRecord framing (plain
// and gzip), MXNet RecordIO (with dmlc-core's split at embedded magic numbers, and .idx files) and .lst
// image lists, plus one generated data set written in every format with the same images in the same
// order. Written from the format descriptions (runtime/data/records/tfrecord.h, recordio.h), independently of
// the readers' code paths, so the tests check the readers against the formats.
#pragma once

#include "runtime/data/records/crc32c.h"
#include "tests/support/image_encode.h"
#include "tests/unit/test_data_helpers.h"

#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace train::data::testing {

using Bytes = std::vector<uint8_t>;

inline void append(Bytes& out, const Bytes& more) { out.insert(out.end(), more.begin(), more.end()); }
inline void append(Bytes& out, const std::string& more) { out.insert(out.end(), more.begin(), more.end()); }

inline void put_varint(Bytes& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<uint8_t>(value | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<uint8_t>(value));
}

inline void put_le(Bytes& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// A length-delimited field.
inline Bytes field(uint32_t number, const Bytes& body) {
  Bytes out;
  put_varint(out, uint64_t{number} << 3 | 2);
  put_varint(out, body.size());
  append(out, body);
  return out;
}

inline Bytes field(uint32_t number, const std::string& body) { return field(number, Bytes(body.begin(), body.end())); }

inline Bytes varint_field(uint32_t number, uint64_t value) {
  Bytes out;
  put_varint(out, uint64_t{number} << 3);
  put_varint(out, value);
  return out;
}

inline Bytes bytes_feature(const Bytes& value) { return field(1, field(1, value)); }  // Feature.bytes_list.value

inline Bytes int64_feature(int64_t value, bool packed) {
  Bytes list;
  if (packed) {
    Bytes run;
    put_varint(run, static_cast<uint64_t>(value));
    list = field(1, run);
  } else {
    list = varint_field(1, static_cast<uint64_t>(value));
  }
  return field(3, list);  // Feature.int64_list
}

inline Bytes map_entry(const std::string& key, const Bytes& feature) {
  Bytes entry = field(1, key);
  append(entry, field(2, feature));
  return field(1, entry);  // Features.feature
}

// A tf.train.Example as TensorFlow writes ImageNet: image/encoded, image/class/label, plus other features.
inline Bytes example(const Bytes& image, int64_t label, bool packed_label = true) {
  Bytes features;
  append(features, map_entry("image/format", bytes_feature(Bytes{'J', 'P', 'E', 'G'})));
  append(features, map_entry("image/encoded", bytes_feature(image)));
  append(features, map_entry("image/class/label", int64_feature(label, packed_label)));
  append(features, map_entry("image/height", int64_feature(7, packed_label)));
  return field(1, features);  // Example.features
}

inline Bytes tfrecord(const Bytes& data) {
  Bytes out;
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  append(out, data);
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

inline Bytes gzip(const Bytes& data) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("deflateInit2");
  Bytes out(deflateBound(&z, data.size()) + 64);
  z.next_in = const_cast<uint8_t*>(data.data());
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

constexpr uint32_t kMagic = 0xced7230a;

// One RecordIO record as dmlc-core writes it: cut at every 4-byte-aligned copy of the magic number.
inline Bytes recordio(const Bytes& data) {
  Bytes out;
  auto part = [&](uint32_t cflag, size_t from, size_t to) {
    put_le(out, kMagic, 4);
    put_le(out, uint64_t{cflag} << 29 | (to - from), 4);
    out.insert(out.end(), data.begin() + static_cast<long>(from), data.begin() + static_cast<long>(to));
    while (out.size() % 4 != 0) out.push_back(0);
  };
  size_t start = 0;
  for (size_t i = 0; i + 4 <= data.size() - data.size() % 4; i += 4) {
    uint32_t word;
    std::memcpy(&word, data.data() + i, 4);
    if (word == kMagic) {
      part(start == 0 ? 1 : 2, start, i);
      start = i + 4;
    }
  }
  part(start == 0 ? 0 : 3, start, data.size());
  return out;
}

// An image record: header (flag, label, id, id2), an optional label array, the image.
inline Bytes image_record(const Bytes& image, float label, uint64_t id, const std::vector<float>& label_array = {}) {
  Bytes out;
  put_le(out, label_array.size(), 4);
  uint32_t bits;
  const float header_label = label_array.empty() ? label : 0.0f;
  std::memcpy(&bits, &header_label, 4);
  put_le(out, bits, 4);
  put_le(out, id, 8);
  put_le(out, 0, 8);
  for (float value : label_array) {
    std::memcpy(&bits, &value, 4);
    put_le(out, bits, 4);
  }
  append(out, image);
  return out;
}

inline void write_bytes(const std::filesystem::path& path, const Bytes& bytes) {
  std::filesystem::create_directories(path.parent_path());
  write_file(path.string(), bytes);
}

struct GeneratedImage {
  std::string cls;
  std::string name;
  int32_t label = 0;
  Bytes bytes;
};

// 3 classes, 14 images (JPEG and PNG, assorted sizes), in image-folder order (class, then file name).
// The third class's first image holds the RecordIO magic at an aligned offset so multi-part records occur.
inline std::vector<GeneratedImage> generated_images() {
  std::vector<GeneratedImage> images;
  int n = 0;
  const char* classes[] = {"ant", "bee", "cow"};
  for (int label = 0; label < 3; ++label) {
    for (int i = 0; i < 4 + label % 2 + (label == 2); ++i, ++n) {
      GeneratedImage image{classes[label], "", label, {}};
      const int w = 24 + 5 * n, h = 20 + 3 * (n % 5);
      if (n % 4 == 0) {
        image.name = "img" + std::to_string(i) + ".png";
        PngImage png;
        png.width = w;
        png.height = h;
        png.color = PngColor::rgb;
        const auto pixels = test_pixels(w, h, 3, 100 + n);
        png.samples.assign(pixels.begin(), pixels.end());
        image.bytes = encode_png(png);
      } else {
        image.name = "img" + std::to_string(i) + ".jpg";
        image.bytes = encode_jpeg(test_pixels(w, h, 3, 100 + n).data(), w, h, 3, {.quality = 80});
      }
      if (label == 2 && i == 0) {
        // JPEG decoders ignore bytes after the end-of-image marker: trailing magic numbers make the record
        // multi-part without changing the pixels.
        while (image.bytes.size() % 4 != 0) image.bytes.push_back(0);
        for (int k = 0; k < 3; ++k) put_le(image.bytes, kMagic, 4);
      }
      images.push_back(std::move(image));
    }
  }
  return images;
}

struct GeneratedDataSet {
  std::string folder;        // class subfolders
  std::string tfrecord;      // two plain shards and a gzip shard
  std::string recordio;      // data.rec + data.idx
  std::string recordio_bare; // data.rec only
  std::string list_images;   // the images, for the .lst
  std::string list_lists;    // train.lst
};

// Writes the images in every format under `root`; records follow the image folder's order.
inline GeneratedDataSet write_generated_data_set(const std::filesystem::path& root,
                                                 const std::vector<GeneratedImage>& images) {
  GeneratedDataSet set{(root / "folder").string(), (root / "tfrecord").string(), (root / "recordio").string(),
                       (root / "recordio_bare").string(), (root / "list_images").string(), (root / "list").string()};
  Bytes shards[3], rec, idx;
  std::string lst;
  for (size_t i = 0; i < images.size(); ++i) {
    const auto& image = images[i];
    const std::string relative = image.cls + "/" + image.name;
    write_bytes(std::filesystem::path(set.folder) / relative, image.bytes);
    write_bytes(std::filesystem::path(set.list_images) / relative, image.bytes);
    // Shards a, b (plain) and c (gzip), in that order, each a contiguous slice: 5, 5, rest.
    const size_t shard = i < 5 ? 0 : i < 10 ? 1 : 2;
    append(shards[shard], tfrecord(example(image.bytes, image.label + 1, i % 2 == 0)));
    const std::string line = std::to_string(i) + "\t" + std::to_string(rec.size()) + "\n";
    idx.insert(idx.end(), line.begin(), line.end());
    const bool label_array = i % 3 == 1;
    append(rec, recordio(image_record(image.bytes, static_cast<float>(image.label), i,
                                      label_array ? std::vector<float>{static_cast<float>(image.label), 9.0f}
                                                  : std::vector<float>{})));
    lst += std::to_string(i) + "\t" + std::to_string(image.label) + ".000000\t" + relative + "\n";
  }
  write_bytes(std::filesystem::path(set.tfrecord) / "train-00000-of-00003.tfrecord", shards[0]);
  write_bytes(std::filesystem::path(set.tfrecord) / "train-00001-of-00003", shards[1]);  // no extension: sniffed
  write_bytes(std::filesystem::path(set.tfrecord) / "train-00002-of-00003.tfrecord.gz", gzip(shards[2]));
  write_bytes(std::filesystem::path(set.recordio) / "data.rec", rec);
  write_bytes(std::filesystem::path(set.recordio) / "data.idx", idx);
  write_bytes(std::filesystem::path(set.recordio_bare) / "data.rec", rec);
  write_bytes(std::filesystem::path(set.list_lists) / "train.lst", Bytes(lst.begin(), lst.end()));
  return set;
}

}  // namespace train::data::testing
