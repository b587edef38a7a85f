#include "runtime/model_io/model_files.h"
#include "runtime/model_io/safetensors.h"

#include "tests/unit/test_model_io_support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace train::model_io;
using model_io_test::read_bytes;
using model_io_test::ScratchDir;

TEST_CASE("model files: model.json says arch, classes, input shape and normalisation", "[model_io]") {
  ModelDescription description;
  description.num_layers = 50;
  description.num_classes = 2;
  description.classes = {"cat", "dog"};
  description.version = "0.1.0";
  CHECK(model_json_text(description) == R"({
  "arch": "resnet50",
  "num_layers": 50,
  "num_classes": 2,
  "classes": [
    "cat",
    "dog"
  ],
  "input_shape": [
    3,
    224,
    224
  ],
  "layout": "NCHW",
  "weights": "model.safetensors",
  "normalization": {
    "scale": 0.00392156862745098,
    "mean": [
      0.485,
      0.456,
      0.406
    ],
    "std": [
      0.229,
      0.224,
      0.225
    ]
  },
  "framework": "train",
  "version": "0.1.0"
}
)");
  auto parsed = parse_model_json(model_json_text(description), "model.json");
  CHECK(parsed.num_layers == 50);
  CHECK(parsed.num_classes == 2);
  CHECK(parsed.classes == description.classes);
  CHECK(parsed.input_shape == description.input_shape);
  CHECK(parsed.mean == description.mean);
  CHECK(parsed.std == description.std);
  CHECK(parsed.version == "0.1.0");
}

TEST_CASE("model files: without class names the labels are the names", "[model_io]") {
  ModelDescription description;
  description.num_layers = 18;
  description.num_classes = 3;
  description.input_shape = {3, 112, 96};
  auto parsed = parse_model_json(model_json_text(description), "model.json");
  CHECK(parsed.classes == std::vector<std::string>{"0", "1", "2"});
  CHECK(parsed.input_shape == std::array<int, 3>{3, 112, 96});

  description.classes = {"only one"};
  CHECK_THROWS_WITH(model_json_text(description), "model.json: 1 class names for num_classes 3");
  CHECK_THROWS_WITH(parse_model_json("{\"num_layers\": 50}", "in/model.json"),
                    Catch::Matchers::StartsWith("in/model.json: not a valid model.json: "));
}

TEST_CASE("model files: write_model_files leaves model.safetensors and model.json, nothing else", "[model_io]") {
  ScratchDir dir;
  const auto model_dir = dir.path() / "model";  // created on demand
  std::vector<float> fc_weight(2 * 4, 0.5f), fc_bias{0.0f, 1.0f};
  int64_t counter = 3;
  ModelDescription description;
  description.num_classes = 2;
  write_model_files(model_dir,
                    {{"fc.weight", Dtype::F32, {2, 4}, fc_weight.data()},
                     {"fc.bias", Dtype::F32, {2}, fc_bias.data()},
                     {"bn1.num_batches_tracked", Dtype::I64, {}, &counter}},
                    description);
  std::set<std::string> entries;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir)) entries.insert(entry.path().filename());
  CHECK(entries == std::set<std::string>{"model.json", "model.safetensors"});

  auto file = read_safetensors((model_dir / "model.safetensors").string());
  CHECK(file.metadata.at("arch") == "resnet50");
  CHECK(file.metadata.at("format") == "pt");
  CHECK(file.metadata.at("framework") == "train");
  // Each tensor's CRC-32 (Python: format(zlib.crc32(bytes), "08x")): 8 floats of 0.5, then [0, 1], then 3.
  CHECK(nlohmann::json::parse(file.metadata.at("tensor_crc32")) ==
        nlohmann::json{{"fc.weight", "34251b6a"}, {"fc.bias", "e8c76a1f"}, {"bn1.num_batches_tracked", "ebadd88a"}});
  CHECK(file.metadata.size() == 4);
  REQUIRE(file.tensors.size() == 3);
  CHECK(file.tensors[1].to_float() == fc_bias);
  CHECK(file.tensors[2].to_int64() == std::vector<int64_t>{3});
  CHECK(parse_model_json(read_bytes((model_dir / "model.json").string()), "model.json").num_classes == 2);
}

TEST_CASE("model files: temporaries an interrupted write left in model/ are swept, the user's files kept",
          "[model_io]") {
  // Issue 31: a SIGKILL during the model's write left model.safetensors.tmp-XXXXXX, a restart that succeeded kept
  // it, and SageMaker would have shipped it in model.tar.gz.
  ScratchDir dir;
  const auto model_dir = dir.path() / "model";
  std::filesystem::create_directories(model_dir);
  const std::set<std::string> users = {"model.safetensors.tmp-keep.txt", "notes.tmp-abc123", "model.json.tmp-12345",
                                       "model.safetensors.old"};
  std::set<std::string> planted = users;
  planted.insert({"model.safetensors.tmp-aB3xYz", "model.safetensors.tmp-000000", "model.json.tmp-QQQQQQ"});
  for (const auto& name : planted) model_io_test::write_bytes((model_dir / name).string(), "x");
  std::vector<float> fc_bias{0.0f, 1.0f};
  ModelDescription description;
  description.num_classes = 2;
  write_model_files(model_dir, {{"fc.bias", Dtype::F32, {2}, fc_bias.data()}}, description);
  std::set<std::string> entries;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir)) entries.insert(entry.path().filename());
  std::set<std::string> expected = users;
  expected.insert({"model.json", "model.safetensors"});
  CHECK(entries == expected);
}
