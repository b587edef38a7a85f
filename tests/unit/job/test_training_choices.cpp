// The choices of train's own training as types: one table of names per choice, which the schema offers, the
// parser turns into the typed value once, and the logs name a value from.
#include "job/hyperparameter_schema.h"
#include "job/hyperparameters.h"
#include "job/training_choices.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

using namespace train;
using train::testing::config_error_message;

namespace {

template <typename Choice, size_t N>
std::vector<std::string_view> names_in(const EnumName<Choice> (&table)[N]) {
  std::vector<std::string_view> names;
  for (const auto& entry : table) names.emplace_back(entry.name);
  return names;
}

// Each value's name reads back as that value, and no two values share a name.
template <typename Choice, size_t N>
void check_round_trip(const EnumName<Choice> (&table)[N]) {
  for (const auto& entry : table) {
    INFO(entry.name);
    CHECK(value_named(table, name_of(table, entry.value)) == entry.value);
  }
}

Hyperparameters parse_text(const std::string& text) {
  return parse_hyperparameters(nlohmann::json::parse(text), "hyperparameters.json");
}

}  // namespace

TEST_CASE("training choices: every name reads back as its value", "[training_choices]") {
  check_round_trip(optimizer_names);
  check_round_trip(lr_decay_names);
  check_round_trip(augmentation_names);
  check_round_trip(data_format_names);
  check_round_trip(precision_names);
  check_round_trip(device_choice_names);
  check_round_trip(device_names);
  CHECK(std::string(augmentation_name(Augmentation::crop_color)) == "crop_color");
  CHECK(std::string(data_format_name(DataFormat::detect)) == "auto");
  CHECK(std::string(lr_decay_name(LrDecay::poly)) == "poly");
  CHECK(std::string(precision_name(Precision::bfloat16)) == "bfloat16");
  CHECK(std::string(device_name(Device::cuda)) == "cuda");
}

TEST_CASE("training choices: the schema offers exactly each choice's names", "[training_choices]") {
  CHECK(find_hyperparameter("optimizer")->choices == names_in(optimizer_names));
  CHECK(find_hyperparameter("lr_scheduler")->choices == names_in(lr_decay_names));
  CHECK(find_hyperparameter("augmentation_type")->choices ==
        std::vector<std::string_view>{"none", "crop", "crop_color"});
  CHECK(find_hyperparameter("data_format")->choices ==
        std::vector<std::string_view>{"auto", "image_folder", "image_list", "tfrecord", "recordio", "synthetic"});
  CHECK(find_hyperparameter("precision_dtype")->choices == names_in(precision_names));
  CHECK(find_hyperparameter("device")->choices == std::vector<std::string_view>{"auto", "cuda", "cpu"});
}

TEST_CASE("training choices: a name becomes its value once, where the file is read", "[training_choices]") {
  auto hp = parse_text(R"({"augmentation_type": "crop_color", "data_format": "\"tfrecord\"", "optimizer": "lars",
                           "lr_scheduler": "poly", "precision_dtype": "bfloat16", "device": "cuda"})");
  CHECK(hp.augmentation_type == Augmentation::crop_color);
  CHECK(hp.data_format == DataFormat::tfrecord);
  CHECK(hp.optimizer == Optimizer::lars);
  CHECK(hp.lr_scheduler == LrDecay::poly);
  CHECK(hp.precision_dtype == Precision::bfloat16);
  CHECK(hp.device == DeviceChoice::cuda);
  CHECK(parse_text(R"({"data_format": "auto"})").data_format == DataFormat::detect);
  // What no table names is refused by the schema, with what it accepts.
  CHECK(config_error_message([] { parse_text(R"({"augmentation_type": "crop-color"})"); }) ==
        "hyperparameter `augmentation_type`: expected one of none, crop or crop_color, got \"crop-color\"");
  CHECK(config_error_message([] { parse_text(R"({"data_format": "parquet"})"); }) ==
        "hyperparameter `data_format`: expected one of auto, image_folder, image_list, tfrecord, recordio or "
        "synthetic, got \"parquet\"");
}
