#include "runtime/model_io/safetensors.h"
#include "runtime/model_io/tensor_checksums.h"

#include "tests/unit/test_model_io_support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <limits>

using namespace train::model_io;
using model_io_test::raw_file;
using model_io_test::ScratchDir;

namespace {

template <typename T>
std::vector<T> values_of(const Tensor& tensor) {
  std::vector<T> values(tensor.data.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), tensor.data.data(), tensor.data.size());
  return values;
}

// Parses `bytes` and returns the SafetensorsError's message ("" when it parsed).
std::string parse_error(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "t.safetensors");
  } catch (const SafetensorsError& error) {
    return error.what();
  }
  return "";
}

std::string entry(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return R"({"dtype": ")" + dtype + R"(", "shape": )" + shape + R"(, "data_offsets": )" + offsets + "}";
}

}  // namespace

TEST_CASE("safetensors: a round trip keeps names, order, dtypes, shapes, bytes and metadata", "[model_io]") {
  ScratchDir dir;
  std::vector<float> weight(2 * 3 * 3 * 3);
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = 0.25f * static_cast<float>(i) - 3.0f;
  std::vector<float> bias{1.5f, -2.5f};
  int64_t counter = 1234567890123;
  std::vector<double> doubles{1.0 / 3.0, -1e300};
  std::vector<TensorView> tensors{
      {"conv1.weight", Dtype::F32, {2, 3, 3, 3}, weight.data()},
      {"bn1.num_batches_tracked", Dtype::I64, {}, &counter},  // a scalar, as torchvision has it
      {"a.bias", Dtype::F32, {2}, bias.data()},               // written after, though sorted before
      {"empty", Dtype::F32, {0, 4}, nullptr},                 // zero elements need no data
      {"doubles", Dtype::F64, {2}, doubles.data()},
  };
  Metadata metadata{{"format", "pt"}, {"note", "ünïcödé"}};
  const std::string path = dir.file("m.safetensors");
  write_safetensors(path, tensors, metadata);

  SafetensorsFile file = read_safetensors(path);
  CHECK(file.metadata == metadata);
  REQUIRE(file.tensors.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].name);
    CHECK(file.tensors[i].name == tensors[i].name);
    CHECK(file.tensors[i].dtype == tensors[i].dtype);
    CHECK(file.tensors[i].shape == tensors[i].shape);
    CHECK(file.tensors[i].data.size() == tensors[i].byte_size());
  }
  CHECK(file.tensors[0].to_float() == weight);
  CHECK(values_of<int64_t>(file.tensors[1]) == std::vector<int64_t>{counter});
  CHECK(file.tensors[1].to_int64() == std::vector<int64_t>{counter});
  CHECK(file.tensors[2].to_float() == bias);
  CHECK(file.tensors[3].data.empty());
  CHECK(values_of<double>(file.tensors[4]) == doubles);
  CHECK(file.find("a.bias") == &file.tensors[2]);
  CHECK(file.find("nope") == nullptr);

  // The file and the in-memory encoding are the same bytes, and parse the same.
  std::string bytes = model_io_test::read_bytes(path);
  CHECK(bytes == encode_safetensors(tensors, metadata));
  CHECK(parse_safetensors(bytes, "memory").tensors[0].to_float() == weight);
}

TEST_CASE("safetensors: the bytes follow the format", "[model_io]") {
  std::vector<float> values{1.0f, 2.0f, 3.0f};
  int64_t counter = 7;
  std::string bytes = encode_safetensors({{"w", Dtype::F32, {3}, values.data()}, {"n", Dtype::I64, {}, &counter}},
                                         {{"format", "pt"}});
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | static_cast<unsigned char>(bytes[i]);
  // The data starts 8-byte aligned; the padding is spaces.
  CHECK((8 + header_length) % 8 == 0);
  std::string header = bytes.substr(8, header_length);
  std::string unpadded =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
      R"("n":{"dtype":"I64","shape":[],"data_offsets":[12,20]}})";
  CHECK(header.substr(0, unpadded.size()) == unpadded);
  CHECK(header.substr(unpadded.size()) == std::string(header.size() - unpadded.size(), ' '));
  CHECK(header.size() - unpadded.size() < 8);
  // Then the raw little-endian data, tensors contiguous in the order written.
  REQUIRE(bytes.size() == 8 + header_length + 20);
  CHECK(std::memcmp(bytes.data() + 8 + header_length, values.data(), 12) == 0);
  CHECK(std::memcmp(bytes.data() + 8 + header_length + 12, &counter, 8) == 0);
}

TEST_CASE("safetensors: an empty file (no tensors) round-trips", "[model_io]") {
  std::string bytes = encode_safetensors({});
  CHECK(bytes.size() == 16);  // length, "{}" padded to 8
  auto file = parse_safetensors(bytes, "empty");
  CHECK(file.tensors.empty());
  CHECK(file.metadata.empty());
}

TEST_CASE("safetensors: F16, BF16 and F64 tensors read as float", "[model_io]") {
  // 1, -2, 65504 (largest half), 2^-24 (smallest subnormal), 2^-14 (smallest normal), +inf, -0
  std::vector<uint16_t> half{0x3C00, 0xC000, 0x7BFF, 0x0001, 0x0400, 0x7C00, 0x8000};
  std::vector<uint16_t> bf16{0x3F80, 0x4049, 0xC2F7, 0x0001, 0xFF80};
  std::vector<double> f64{0.1, -1e-3, 1e30};
  std::string bytes = encode_safetensors({{"h", Dtype::F16, {7}, half.data()},
                                          {"b", Dtype::BF16, {5}, bf16.data()},
                                          {"d", Dtype::F64, {3}, f64.data()}});
  auto file = parse_safetensors(bytes, "mixed");
  auto h = file.tensors[0].to_float();
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == 65504.0f);
  CHECK(h[3] == std::ldexp(1.0f, -24));
  CHECK(h[4] == std::ldexp(1.0f, -14));
  CHECK(h[5] == std::numeric_limits<float>::infinity());
  CHECK((h[6] == 0.0f && std::signbit(h[6])));
  CHECK(std::isnan(half_to_float(0x7E00)));
  CHECK(half_to_float(0x03FF) == std::ldexp(1023.0f, -24));  // largest subnormal
  auto b = file.tensors[1].to_float();
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == 3.140625f);
  CHECK(b[2] == -123.5f);
  CHECK(b[3] == std::ldexp(1.0f, -133));  // bf16 subnormal
  CHECK(b[4] == -std::numeric_limits<float>::infinity());
  auto d = file.tensors[2].to_float();
  CHECK(d == std::vector<float>{0.1f, -1e-3f, 1e30f});
  CHECK_THROWS_WITH(file.tensors[0].to_int64(), "tensor \"h\": expected an integer tensor, found F16");
}

TEST_CASE("safetensors: every dtype of the format is known", "[model_io]") {
  for (auto [name, size] : std::vector<std::pair<std::string, size_t>>{
           {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"U16", 2}, {"I16", 2}, {"F16", 2}, {"BF16", 2},
           {"U32", 4}, {"I32", 4}, {"F32", 4}, {"U64", 8}, {"I64", 8}, {"F64", 8}}) {
    auto dtype = parse_dtype(name);
    REQUIRE(dtype);
    CHECK(dtype_name(*dtype) == name);
    CHECK(dtype_size(*dtype) == size);
  }
  CHECK_FALSE(parse_dtype("f32"));
  CHECK_FALSE(parse_dtype("F8_E4M3"));
  std::vector<int32_t> ints{-5, 7};
  auto file = parse_safetensors(encode_safetensors({{"i", Dtype::I32, {2}, ints.data()}}), "ints");
  CHECK(file.tensors[0].to_int64() == std::vector<int64_t>{-5, 7});
  CHECK_THROWS_WITH(file.tensors[0].to_float(), "tensor \"i\": expected a floating-point tensor, found I32");
}

TEST_CASE("safetensors: the writer refuses tensors it cannot write", "[model_io]") {
  float value = 1.0f;
  CHECK_THROWS_WITH(encode_safetensors({{"a", Dtype::F32, {}, &value}, {"a", Dtype::F32, {}, &value}}, {}, "out"),
                    "out: tensor \"a\": the name appears twice");
  CHECK_THROWS_WITH(encode_safetensors({{"__metadata__", Dtype::F32, {}, &value}}, {}, "out"),
                    "out: tensor \"__metadata__\": this name is reserved for the metadata");
  CHECK_THROWS_WITH(encode_safetensors({{"", Dtype::F32, {}, &value}}, {}, "out"), "out: a tensor has an empty name");
  CHECK_THROWS_WITH(encode_safetensors({{"a", Dtype::F32, {2, -1}, &value}}, {}, "out"),
                    "out: tensor \"a\": invalid shape [2, -1]");
  CHECK_THROWS_WITH(encode_safetensors({{"a", Dtype::F32, {1}, nullptr}}, {}, "out"), "out: tensor \"a\": no data");
}

TEST_CASE("safetensors: malformed files are refused with messages naming the file, the tensor and the fault",
          "[model_io]") {
  const std::string a = entry("F32", "[2]", "[0, 8]");

  SECTION("shorter than the length field") {
    CHECK(parse_error(std::string(5, '\0')) ==
          "t.safetensors: not a safetensors file: it has 5 bytes, fewer than the 8 of the header length");
    CHECK(parse_error("") ==
          "t.safetensors: not a safetensors file: it has 0 bytes, fewer than the 8 of the header length");
  }
  SECTION("header length beyond the file") {
    CHECK(parse_error(model_io_test::length_prefix(100) + std::string(20, ' ')) ==
          "t.safetensors: header length 100 reaches beyond the end of the file (28 bytes): the file is truncated, "
          "or not a safetensors file");
  }
  SECTION("truncated header") {
    std::string whole = raw_file(R"({"a": )" + a + "}", 8);
    CHECK(parse_error(whole.substr(0, 30)) ==
          "t.safetensors: header length 61 reaches beyond the end of the file (30 bytes): the file is truncated, or "
          "not a safetensors file");
  }
  SECTION("truncated data") {
    std::string whole = raw_file(R"({"a": )" + a + "}", 8);
    CHECK(parse_error(whole.substr(0, whole.size() - 3)) ==
          "t.safetensors: tensor \"a\": data_offsets [0, 8] reach beyond the end of the data (5 bytes)");
  }
  SECTION("header length over the limit (and not some other file's first bytes taken as a length)") {
    CHECK(parse_error(model_io_test::length_prefix(uint64_t{1} << 40) + "{}") ==
          "t.safetensors: header length 1099511627776 is larger than the limit of 100000000 bytes: this is not a "
          "safetensors file, or a damaged one");
    CHECK(parse_error(std::string("\x89PNG\r\n\x1a\n", 8) + std::string(100, '\0')) ==
          "t.safetensors: header length 727905341920923785 is larger than the limit of 100000000 bytes: this is "
          "not a safetensors file, or a damaged one");
  }
  SECTION("bad JSON") {
    CHECK(parse_error(raw_file(R"({"a": {"dtype": "F32",)", 0)) ==
          "t.safetensors: header is not valid JSON: parse error at line 1, column 23: syntax error while parsing "
          "object key - unexpected end of input; expected string literal");
    CHECK(parse_error(raw_file("{\"a\xff\": 1}", 0)) ==
          "t.safetensors: header is not valid JSON: parse error at line 1, column 4: syntax error while parsing "
          "object key - invalid string: ill-formed UTF-8 byte; last read: '\"a<0xFF>'; expected string literal");
    // Padding is spaces; NUL bytes would make nlohmann stop reading early.
    CHECK(parse_error(raw_file(std::string("{}\0\0\0\0\0\0", 8), 0)) ==
          "t.safetensors: header is not valid JSON: a NUL byte at position 2");
    CHECK(parse_error(raw_file(std::string("{}\0{\"a\": 1}", 11), 0)) ==
          "t.safetensors: header is not valid JSON: a NUL byte at position 2");
  }
  SECTION("a header nesting lists or objects deeper than a config file may (issue 31: 100,000 levels crashed)") {
    const std::string expected =
        "t.safetensors: header is not a safetensors header: it nests lists and objects more than 64 levels deep "
        "(a tensor's entry needs 3): the file is damaged, or not a safetensors file";
    const int deep = 100'000;
    CHECK(parse_error(raw_file(R"({"a": )" + std::string(deep, '[') + std::string(deep, ']') + "}", 0)) == expected);
    std::string objects;
    for (int level = 0; level < deep; ++level) objects += R"({"k": )";
    objects += "1" + std::string(deep, '}');
    CHECK(parse_error(raw_file(objects, 0)) == expected);
    CHECK(parse_error(raw_file(R"({"__metadata__": {"k": )" + std::string(deep, '[') + "}", 0)) == expected);
    // 64 levels (the header's object and 63 lists) are still parsed, and refused for what they hold.
    CHECK(parse_error(raw_file(R"({"a": )" + std::string(63, '[') + std::string(63, ']') + "}", 0)).find(
              "expected an object with") != std::string::npos);
    CHECK(parse_error(raw_file(R"({"a": )" + std::string(64, '[') + std::string(64, ']') + "}", 0)) == expected);
  }
  SECTION("a header that is not an object") {
    CHECK(parse_error(raw_file("[1, 2]", 0)) ==
          "t.safetensors: header is a JSON array, expected an object of tensors");
  }
  SECTION("duplicate names") {
    CHECK(parse_error(raw_file(R"({"a": )" + a + R"(, "a": )" + entry("F32", "[2]", "[8, 16]") + "}", 16)) ==
          "t.safetensors: header names tensor \"a\" twice");
    CHECK(parse_error(raw_file(R"({"a": {"dtype": "F32", "dtype": "I64", "shape": [2], "data_offsets": [0, 8]}})",
                               8)) == "t.safetensors: tensor \"a\": key \"dtype\" appears twice");
    CHECK(parse_error(raw_file(R"({"__metadata__": {"k": "1", "k": "2"}})", 0)) ==
          "t.safetensors: \"__metadata__\": key \"k\" appears twice");
    CHECK(parse_error(raw_file(R"({"__metadata__": {}, "__metadata__": {}})", 0)) ==
          "t.safetensors: header has \"__metadata__\" twice");
  }
  SECTION("unknown dtype") {
    CHECK(parse_error(raw_file(R"({"a": )" + entry("F8", "[2]", "[0, 2]") + "}", 2)) ==
          "t.safetensors: tensor \"a\": unknown dtype \"F8\"; expected one of BOOL, U8, I8, U16, I16, F16, BF16, "
          "U32, I32, F32, U64, I64, F64");
    CHECK(parse_error(raw_file(R"({"a": {"dtype": 4, "shape": [2], "data_offsets": [0, 8]}})", 8)) ==
          "t.safetensors: tensor \"a\": \"dtype\" must be a string, found 4");
  }
  SECTION("byte length that does not fit the shape") {
    CHECK(parse_error(raw_file(R"({"a": )" + entry("F32", "[2, 3]", "[0, 20]") + "}", 20)) ==
          "t.safetensors: tensor \"a\": shape [2, 3] of F32 needs 24 bytes, but data_offsets [0, 20] hold 20");
    CHECK(parse_error(raw_file(R"({"n": )" + entry("I64", "[]", "[0, 4]") + "}", 4)) ==
          "t.safetensors: tensor \"n\": shape [] of I64 needs 8 bytes, but data_offsets [0, 4] hold 4");
    CHECK(parse_error(raw_file(R"({"a": )" + entry("F32", "[4294967296, 4294967296, 16]", "[0, 8]") + "}", 8)) ==
          "t.safetensors: tensor \"a\": shape [4294967296, 4294967296, 16] has too many elements");
  }
  SECTION("offsets out of range") {
    CHECK(parse_error(raw_file(R"({"a": )" + entry("F32", "[6]", "[0, 24]") + "}", 16)) ==
          "t.safetensors: tensor \"a\": data_offsets [0, 24] reach beyond the end of the data (16 bytes)");
    CHECK(parse_error(raw_file(R"({"a": )" + entry("F32", "[0]", "[8, 0]") + "}", 8)) ==
          "t.safetensors: tensor \"a\": data_offsets [8, 0] end before they begin");
    CHECK(parse_error(raw_file(R"({"a": )" + entry("F32", "[2]", "[-8, 0]") + "}", 8)) ==
          "t.safetensors: tensor \"a\": \"data_offsets\" must be two non-negative integers [begin, end], found "
          "[-8,0]");
    CHECK(parse_error(raw_file(R"({"a": )" + entry("F32", "[2]", "[0]") + "}", 8)) ==
          "t.safetensors: tensor \"a\": \"data_offsets\" must be two non-negative integers [begin, end], found [0]");
  }
  SECTION("overlapping offsets") {
    CHECK(parse_error(raw_file(R"({"a": )" + a + R"(, "b": )" + entry("F32", "[2]", "[4, 12]") + "}", 12)) ==
          "t.safetensors: tensor \"b\": data_offsets [4, 12] overlap tensor \"a\" at [0, 8]");
    // The same range twice is an overlap too.
    CHECK(parse_error(raw_file(R"({"a": )" + a + R"(, "b": )" + a + "}", 8)) ==
          "t.safetensors: tensor \"b\": data_offsets [0, 8] overlap tensor \"a\" at [0, 8]");
  }
  SECTION("data not covered: a gap, bytes at the start, bytes at the end") {
    CHECK(parse_error(raw_file(R"({"a": )" + a + R"(, "b": )" + entry("F32", "[2]", "[12, 20]") + "}", 20)) ==
          "t.safetensors: bytes [8, 12) of the data belong to no tensor");
    CHECK(parse_error(raw_file(R"({"a": )" + entry("F32", "[2]", "[4, 12]") + "}", 12)) ==
          "t.safetensors: bytes [0, 4) of the data belong to no tensor");
    CHECK(parse_error(raw_file(R"({"a": )" + a + "}", 16)) ==
          "t.safetensors: bytes [8, 16) of the data belong to no tensor");
    CHECK(parse_error(raw_file("{}", 3)) == "t.safetensors: bytes [0, 3) of the data belong to no tensor");
  }
  SECTION("entries of the wrong form") {
    CHECK(parse_error(raw_file(R"({"a": 5})", 0)) ==
          "t.safetensors: tensor \"a\": expected an object with \"dtype\", \"shape\" and \"data_offsets\", found 5");
    CHECK(parse_error(raw_file(R"({"a": {"dtype": "F32", "data_offsets": [0, 8]}})", 8)) ==
          "t.safetensors: tensor \"a\": \"shape\" is missing");
    CHECK(parse_error(raw_file(R"({"a": {"dtype": "F32", "shape": [2]}})", 8)) ==
          "t.safetensors: tensor \"a\": \"data_offsets\" is missing");
    CHECK(parse_error(raw_file(R"({"a": )" + entry("F32", "[-1]", "[0, 8]") + "}", 8)) ==
          "t.safetensors: tensor \"a\": \"shape\" must be an array of non-negative integers, found [-1]");
    CHECK(parse_error(raw_file(R"({"a": )" + entry("F32", "[2.0]", "[0, 8]") + "}", 8)) ==
          "t.safetensors: tensor \"a\": \"shape\" must be an array of non-negative integers, found [2.0]");
    CHECK(parse_error(raw_file(R"({"": )" + a + "}", 8)) == "t.safetensors: a tensor has an empty name");
    // Control characters that JSON escapes put into a name are shown, not passed on to logs raw.
    CHECK(parse_error(raw_file(R"({"a\u0001b": 5})", 0)) ==
          "t.safetensors: tensor \"a<0x01>b\": expected an object with \"dtype\", \"shape\" and \"data_offsets\", "
          "found 5");
    CHECK(parse_error(raw_file(R"({"__metadata__": {"k": 1}})", 0)) ==
          "t.safetensors: \"__metadata__\": the value of \"k\" must be a string, found 1");
    CHECK(parse_error(raw_file(R"({"__metadata__": ["k"]})", 0)) ==
          "t.safetensors: \"__metadata__\" must be an object of strings, found [\"k\"]");
    // A long value is cut short in the message.
    CHECK(parse_error(raw_file(R"({"a": ")" + std::string(1000, 'x') + "\"}", 0)) ==
          "t.safetensors: tensor \"a\": expected an object with \"dtype\", \"shape\" and \"data_offsets\", found \"" +
              std::string(56, 'x') + "...");
  }
}

TEST_CASE("safetensors: read_safetensors names the path in its errors", "[model_io]") {
  ScratchDir dir;
  const std::string missing = dir.file("missing.safetensors");
  CHECK_THROWS_WITH(read_safetensors(missing), missing + ": cannot open: No such file or directory");
  CHECK_THROWS_WITH(read_safetensors(dir.path().string()), dir.path().string() + ": not a regular file but a directory");

  const std::string truncated = dir.file("truncated.safetensors");
  std::vector<float> values(16, 1.0f);
  std::string whole = encode_safetensors({{"conv1.weight", Dtype::F32, {16}, values.data()}});
  model_io_test::write_bytes(truncated, whole.substr(0, whole.size() - 1));
  CHECK_THROWS_WITH(read_safetensors(truncated),
                    truncated + ": tensor \"conv1.weight\": data_offsets [0, 64] reach beyond the end of the data (63 bytes)");
  model_io_test::write_bytes(truncated, whole.substr(0, 20));
  CHECK_THROWS_AS(read_safetensors(truncated), SafetensorsError);
}

TEST_CASE("safetensors: a file that carries tensor checksums is checked against them", "[model_io]") {
  ScratchDir dir;
  std::vector<float> weight{0.0332f, 1.0f, -2.0f};
  const std::vector<TensorView> tensors{{"fc.weight", Dtype::F32, {3}, weight.data()}};
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, tensors, with_tensor_checksums(tensors, {{"format", "pt"}}));
  CHECK(read_safetensors(path).tensors[0].to_float() == weight);

  // 0.0332 with one bit of its exponent flipped (the byte before the last of the first float).
  std::string bytes = model_io_test::read_bytes(path);
  bytes[bytes.size() - 12 + 3] ^= 0x40;
  model_io_test::write_bytes(path, bytes);
  CHECK_THROWS_WITH(read_safetensors(path),
                    Catch::Matchers::StartsWith(path + ": tensor \"fc.weight\": its bytes do not match the checksum "
                                                       "stored with them (CRC-32 stored "));
  // A file without checksums (a torchvision export) is read as it is.
  write_safetensors(path, tensors, {{"format", "pt"}});
  CHECK(read_safetensors(path).tensors.size() == 1);
}
