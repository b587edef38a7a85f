// hyperparameters.json: decoded exactly as the SageMaker training toolkit decodes it, then checked against
// our schema; every type error with the exact message the user sees.
#include "common/json_file.h"
#include "common/nearest_name.h"
#include "job/hyperparameter_schema.h"
#include "job/hyperparameters.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

using namespace train;
using namespace train::testing;  // the job files' fixture (tests/unit/job_files_fixture.h)
using Json = nlohmann::json;

namespace {

// As train's own training reads the file (the defaults of parse_hyperparameters' other parameters).
const auto parse_text = config_text_parser(
    [](const nlohmann::json& document, const std::string& source) { return parse_hyperparameters(document, source); },
    "hyperparameters.json");

}  // namespace

TEST_CASE("hyperparameters: values decode like the toolkit's json.loads-or-keep", "[hyperparameters]") {
  struct Row {
    Json raw;
    Json decoded;
  };
  const std::vector<Row> rows = {
      {"10", 10},                                  // the SDK's json.dumps(10)
      {"\"resnet50\"", "resnet50"},                // the SDK's json.dumps("resnet50")
      {"true", true},                              // the SDK's json.dumps(True)
      {"0.1", 0.1},                                // a raw API caller's number
      {"sgd", "sgd"},                              // a raw API caller's word: not JSON, stays a string
      {"30,60,80", "30,60,80"},                    // not one JSON value: stays
      {"True", "True"},                            // Python's spelling is not JSON either
      {"", ""},                                    // json.loads("") fails: stays
      {" 10 ", 10},                                // JSON allows white space around a value
      {"null", nullptr},
      {"[30, 60]", Json::array({30, 60})},
      {"{\"a\": 1}", Json{{"a", 1}}},
      {"-x NCCL_DEBUG=INFO", "-x NCCL_DEBUG=INFO"},
      {7, 7},                                      // a non-string value is kept as it is
      {false, false},
      {Json::array({1, 2}), Json::array({1, 2})},
  };
  for (const auto& row : rows) {
    INFO("raw: " << row.raw.dump());
    CHECK(decode_hyperparameter_value(row.raw) == row.decoded);
  }
  // A string nested deeper than any file may be stays a string instead of becoming a deep document.
  std::string deep = std::string(200, '[') + std::string(200, ']');
  CHECK(decode_hyperparameter_value(deep) == Json(deep));
  std::string shallow = std::string(10, '[') + std::string(10, ']');
  CHECK(decode_hyperparameter_value(shallow).is_array());
}

TEST_CASE("hyperparameters: as the SDK JSON-encodes them", "[hyperparameters]") {
  auto hp = parse_text(R"({
    "epochs": "10", "learning_rate": "0.05", "shuffle": "false", "optimizer": "\"nag\"",
    "lr_scheduler": "\"step\"", "lr_scheduler_step": "\"10,20\"", "image_shape": "\"3,160,160\"",
    "num_layers": "18", "warmup_epochs": "5", "custom_mpi_options": "\"-x NCCL_DEBUG=INFO\"",
    "sagemaker_program": "\"train.py\"", "sagemaker_region": "\"us-west-2\"",
    "mini_batch_size": "\"128\"", "momentum": "\"0.8\""})");
  CHECK(hp.epochs == 10);
  // Numbers the user gave the SDK as strings ({"mini_batch_size": "128"}) arrive encoded twice.
  CHECK(hp.mini_batch_size == 128);
  CHECK(hp.momentum == 0.8);
  CHECK(hp.learning_rate == 0.05);
  CHECK(hp.shuffle == false);
  CHECK(hp.optimizer == Optimizer::nag);
  CHECK(hp.lr_scheduler == LrDecay::step);
  CHECK(hp.lr_scheduler_step == std::vector<int64_t>{10, 20});
  CHECK(hp.image_shape == ImageShape{3, 160, 160});
  CHECK(hp.num_layers == 18);
  CHECK(hp.warmup_epochs == 5.0);  // an integer is a fine real
  CHECK(hp.custom_mpi_words() == std::vector<std::string>{"-x", "NCCL_DEBUG=INFO"});
  CHECK(hp.given("epochs"));
  CHECK_FALSE(hp.given("weight_decay"));
  // decoded() holds what the toolkit would: every key, JSON-decoded, sagemaker_* included.
  CHECK(hp.decoded() == Json{{"epochs", 10},
                             {"learning_rate", 0.05},
                             {"shuffle", false},
                             {"optimizer", "nag"},
                             {"lr_scheduler", "step"},
                             {"lr_scheduler_step", "10,20"},
                             {"image_shape", "3,160,160"},
                             {"num_layers", 18},
                             {"warmup_epochs", 5},
                             {"custom_mpi_options", "-x NCCL_DEBUG=INFO"},
                             {"sagemaker_program", "train.py"},
                             {"sagemaker_region", "us-west-2"},
                             {"mini_batch_size", "128"},
                             {"momentum", "0.8"}});
}

TEST_CASE("hyperparameters: as raw API callers send them", "[hyperparameters]") {
  auto hp = parse_text(R"({
    "optimizer": "sgd", "learning_rate": "0.1", "shuffle": "True", "epochs": "5", "lr_scheduler_step": "30, 60",
    "image_shape": "3,224,224", "augmentation_type": "none", "precision_dtype": "float32", "device": "cpu",
    "mini_batch_size": "64", "seed": "4294967295", "momentum": "0", "label_smoothing": "0.1",
    "fusion_threshold_mb": "0.5", "checkpoint_frequency": "0", "max_steps": "100", "num_classes": "1000",
    "lr_scheduler_factor": "1", "weight_decay": "1e-5"})");
  CHECK(hp.optimizer == Optimizer::sgd);
  CHECK(hp.learning_rate == 0.1);
  CHECK(hp.shuffle == true);  // any letter case
  CHECK(hp.epochs == 5);
  CHECK(hp.lr_scheduler_step == std::vector<int64_t>{30, 60});
  CHECK(hp.image_shape == ImageShape{3, 224, 224});
  CHECK(hp.augmentation_type == Augmentation::none);
  CHECK(hp.precision_dtype == Precision::float32);
  CHECK(hp.device == DeviceChoice::cpu);
  CHECK(hp.mini_batch_size == 64);
  CHECK(hp.seed == 4294967295);
  CHECK(hp.momentum == 0.0);
  CHECK(hp.label_smoothing == 0.1);
  CHECK(hp.fusion_threshold_mb == 0.5);
  CHECK(hp.checkpoint_frequency == 0);
  CHECK(hp.max_steps == 100);
  CHECK(hp.num_classes == 1000);
  CHECK(hp.lr_scheduler_factor == 1.0);
  CHECK(hp.weight_decay == 1e-5);
  CHECK(hp.decoded().at("optimizer") == "sgd");
  CHECK(hp.decoded().at("learning_rate") == 0.1);
}

TEST_CASE("hyperparameters: other spellings of the same values", "[hyperparameters]") {
  SECTION("JSON values that are not strings (a hand-written file)") {
    auto hp = parse_text(R"({"epochs": 12, "learning_rate": 0.2, "shuffle": false, "lr_scheduler_step": [5, 9],
                             "image_shape": [3, 32, 32]})");
    CHECK(hp.epochs == 12);
    CHECK(hp.learning_rate == 0.2);
    CHECK(hp.shuffle == false);
    CHECK(hp.lr_scheduler_step == std::vector<int64_t>{5, 9});
    CHECK(hp.image_shape == ImageShape{3, 32, 32});
  }
  SECTION("whole numbers written as reals, and lists as JSON strings") {
    auto hp = parse_text(R"({"epochs": "10.0", "max_steps": "1e3", "lr_scheduler_step": "[30, 60]",
                             "image_shape": "[3, 64, 64]", "shuffle": "\"FALSE\"", "num_layers": "101"})");
    CHECK(hp.epochs == 10);
    CHECK(hp.max_steps == 1000);
    CHECK(hp.lr_scheduler_step == std::vector<int64_t>{30, 60});
    CHECK(hp.image_shape == ImageShape{3, 64, 64});
    CHECK(hp.shuffle == false);
    CHECK(hp.num_layers == 101);
  }
  SECTION("a single step epoch") {
    CHECK(parse_text(R"({"lr_scheduler_step": "45"})").lr_scheduler_step == std::vector<int64_t>{45});
  }
}

TEST_CASE("hyperparameters: defaults fill in what the job did not set", "[hyperparameters]") {
  auto hp = parse_text("{}");
  CHECK(hp.num_layers == 50);
  CHECK(hp.image_shape == ImageShape{3, 224, 224});
  CHECK_FALSE(hp.num_classes.has_value());  // from the data
  CHECK(hp.num_classes == std::nullopt);
  CHECK(hp.mini_batch_size == 256);
  CHECK(hp.epochs == 30);
  CHECK(hp.learning_rate == 0.1);
  CHECK(hp.lr_scheduler == LrDecay::cosine);
  CHECK(hp.lr_scheduler_step == std::vector<int64_t>{30, 60, 80});
  CHECK(hp.lr_scheduler_factor == 0.1);
  CHECK(hp.warmup_epochs == 0.0);
  CHECK(hp.optimizer == Optimizer::sgd);
  CHECK(hp.momentum == 0.9);
  CHECK(hp.weight_decay == 0.0001);
  CHECK(hp.label_smoothing == 0.0);
  CHECK(hp.augmentation_type == Augmentation::crop);
  CHECK_FALSE(hp.precision_dtype.has_value());  // depends on the device
  CHECK(hp.shuffle == true);
  CHECK(hp.seed == 0);
  CHECK(hp.max_steps == 0);
  CHECK(hp.checkpoint_frequency == 1);
  CHECK(hp.fusion_threshold_mb == 25.0);
  CHECK(hp.device == DeviceChoice::automatic);
  CHECK_FALSE(hp.processes_per_host.has_value());  // depends on the GPUs
  CHECK(hp.custom_mpi_options.empty());
  CHECK(hp.custom_mpi_words().empty());
  for (const auto& spec : hyperparameter_schema()) CHECK_FALSE(hp.given(spec.name));
  CHECK(hp.decoded() == Json::object());

  auto effective = hp.effective();
  CHECK(effective.size() == hyperparameter_schema().size());
  CHECK(effective.at("epochs") == 30);
  CHECK(effective.at("lr_scheduler_step") == Json::array({30, 60, 80}));
  CHECK(effective.at("num_classes").is_null());
  CHECK(effective.at("shuffle") == true);

  // Every value is read as a typed field: a read of the wrong type, or of a name the schema lacks, does not compile.
  static_assert(std::is_same_v<decltype(hp.learning_rate), double>);
  static_assert(std::is_same_v<decltype(hp.num_classes), std::optional<int>>);
}

TEST_CASE("hyperparameters: SageMaker's MPI aliases", "[hyperparameters]") {
  SECTION("sagemaker_mpi_num_of_processes_per_host means processes_per_host") {
    auto hp = parse_text(R"({"sagemaker_mpi_num_of_processes_per_host": "4"})");
    CHECK(hp.processes_per_host == 4);
    CHECK(hp.given("processes_per_host"));
    CHECK(hp.decoded().at("sagemaker_mpi_num_of_processes_per_host") == 4);
  }
  SECTION("sagemaker_mpi_custom_mpi_options means custom_mpi_options") {
    auto hp = parse_text(R"({"sagemaker_mpi_custom_mpi_options": "\"-x FOO=1 --mca pml ob1\""})");
    CHECK(hp.custom_mpi_options == "-x FOO=1 --mca pml ob1");
    CHECK(hp.custom_mpi_words() == std::vector<std::string>{"-x", "FOO=1", "--mca", "pml", "ob1"});
    CHECK(hp.given("custom_mpi_options"));
  }
  SECTION("an alias and the name itself with the same value are fine") {
    auto hp = parse_text(R"({"processes_per_host": "2", "sagemaker_mpi_num_of_processes_per_host": "2.0",
                             "custom_mpi_options": "-x A=1", "sagemaker_mpi_custom_mpi_options": "\"-x A=1\""})");
    CHECK(hp.processes_per_host == 2);
    CHECK(hp.custom_mpi_options == "-x A=1");
  }
}

TEST_CASE("hyperparameters: other sagemaker_* keys are ignored but kept in decoded()", "[hyperparameters]") {
  auto hp = parse_text(R"({"sagemaker_program": "\"train.py\"", "sagemaker_submit_directory": "\"s3://b/k.tar.gz\"",
                           "sagemaker_container_log_level": "20", "sagemaker_job_name": "\"job-1\"",
                           "sagemaker_distributed_dataparallel_enabled": "false",
                           "sagemaker_anything_new": "not {json", "epochs": "3"})");
  CHECK(hp.epochs == 3);
  CHECK(hp.decoded() == Json{{"sagemaker_program", "train.py"},
                             {"sagemaker_submit_directory", "s3://b/k.tar.gz"},
                             {"sagemaker_container_log_level", 20},
                             {"sagemaker_job_name", "job-1"},
                             {"sagemaker_distributed_dataparallel_enabled", false},
                             {"sagemaker_anything_new", "not {json"},
                             {"epochs", 3}});
  CHECK_FALSE(hp.given("sagemaker_program"));
  CHECK_FALSE(hp.effective().contains("sagemaker_program"));
}

TEST_CASE("hyperparameters: custom_mpi_options split like a shell line", "[hyperparameters]") {
  struct Row {
    std::string line;
    std::vector<std::string> words;
  };
  const std::vector<Row> rows = {
      {"", {}},
      {"   \t ", {}},
      {"-x NCCL_DEBUG=INFO", {"-x", "NCCL_DEBUG=INFO"}},
      {"  --mca   btl_tcp_if_include\teth0  ", {"--mca", "btl_tcp_if_include", "eth0"}},
      {"-x 'FOO=a b' -x \"BAR=c d\"", {"-x", "FOO=a b", "-x", "BAR=c d"}},
      {"-x BAZ=e\\ f", {"-x", "BAZ=e f"}},
      {"'single \\ keeps backslash'", {"single \\ keeps backslash"}},
      {"\"double \\\"escapes\\\" and \\\\\"", {"double \"escapes\" and \\"}},
      {"\"double \\n keeps others\"", {"double \\n keeps others"}},
      {"a'b'\"c\"d", {"abcd"}},
      {"'' \"\"", {"", ""}},
      {"it\\'s", {"it's"}},
  };
  for (const auto& row : rows) {
    INFO("line: " << row.line);
    CHECK(split_shell_words(row.line, "test") == row.words);
  }
  CHECK(config_error_message([] { split_shell_words("-x 'FOO=bar", "hyperparameter `custom_mpi_options`"); }) ==
        "hyperparameter `custom_mpi_options`: unbalanced single quote in \"-x 'FOO=bar\"; close it or escape it with "
        "a backslash");
  CHECK(config_error_message([] { split_shell_words("-x \"FOO='bar'", "options"); }) ==
        "options: unbalanced double quote in \"-x \\\"FOO='bar'\"; close it or escape it with a backslash");
}

TEST_CASE("hyperparameters: nearest names for misspellings", "[hyperparameters]") {
  std::vector<std::string_view> names;
  for (const auto& spec : hyperparameter_schema()) names.push_back(spec.name);
  CHECK(nearest_name("epoch", names) == "epochs");
  CHECK(nearest_name("Learning-Rate", names) == "learning_rate");
  CHECK(nearest_name("batch_size", names) == "mini_batch_size");
  CHECK(nearest_name("momentum_decay", names) == "momentum");
  CHECK(nearest_name("anything", {}) == "");
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("a-b", "A_B") == 0);
  CHECK(edit_distance("", "abc") == 3);
}

namespace {

// Each row: the file as written, and the whole message.
std::vector<MalformedCase> malformed_hyperparameters() {
  return {
      // The file itself.
      {"not JSON", R"({"epochs": "10")",
       "hyperparameters.json: not valid JSON (parse error at line 1, column 16: syntax error while parsing object - "
       "unexpected end of input; expected '}'); fix the file so that it is one UTF-8 JSON object"},
      // Issue 31: mpirun's arguments were cut at the NUL.
      {"a NUL in custom_mpi_options", R"({"custom_mpi_options": "-x A=b\u0000c"})",
       "hyperparameter `custom_mpi_options`: \"-x A=b\\u0000c\" holds a NUL character, which "
       "no command-line argument can carry; remove it"},
      {"non-UTF-8 byte in a value", "{\"optimizer\": \"sg\xe9\"}",
       "hyperparameters.json: not valid JSON (parse error at line 1, column 19: syntax error while parsing value - "
       "invalid string: ill-formed UTF-8 byte; last read: '\"sg\\xE9\"'); fix the file so that it is one UTF-8 "
       "JSON object"},
      {"non-UTF-8 byte in a key", "{\"epo\xc0\xafhs\": \"10\"}",
       "hyperparameters.json: not valid JSON (parse error at line 1, column 6: syntax error while parsing object "
       "key - invalid string: ill-formed UTF-8 byte; last read: '\"epo\\xC0'; expected string literal); fix the file "
       "so that it is one UTF-8 JSON object"},
      {"a long value with a bad byte at its end", "{\"optimizer\": \"" + std::string(5000, 'a') + "\xff\"}",
       "hyperparameters.json: not valid JSON (parse error at line 1, column 5016: syntax error while parsing value - "
       "invalid string: ill-formed UTF-8 byte; last read: '..." + std::string(39, 'a') + "\\xFF'); fix the file so "
       "that it is one UTF-8 JSON object"},
      {"a key given twice", R"({"epochs": "10", "epochs": "20"})",
       "hyperparameters.json: key \"epochs\" appears more than once in one object; keep exactly one"},
      {"a list", R"(["epochs", "10"])",
       "hyperparameters.json: expected a JSON object mapping hyperparameter names to string values, got a list"},

      // Unknown names.
      {"misspelt", R"({"epoch": "10"})",
       "hyperparameter `epoch` is not known; did you mean `epochs`? (`train hyperparameters` lists them all)"},
      {"wrong separator and case", R"({"Learning-Rate": "0.1"})",
       "hyperparameter `Learning-Rate` is not known; did you mean `learning_rate`? (`train hyperparameters` lists "
       "them all)"},
      {"another algorithm's name", R"({"batch_size": "32"})",
       "hyperparameter `batch_size` is not known; did you mean `mini_batch_size`? (`train hyperparameters` lists "
       "them all)"},
      {"SageMaker prefix in the wrong case", R"({"SageMaker_mpi_custom_mpi_options": "-x A"})",
       "hyperparameter `SageMaker_mpi_custom_mpi_options` is not known; did you mean `custom_mpi_options`? (`train "
       "hyperparameters` lists them all)"},
      {"a control character in the name", R"({"ep\nochs": "10"})",
       "hyperparameter `ep\\nochs` is not known; did you mean `epochs`? (`train hyperparameters` lists them all)"},
      {"a huge name", R"({")" + std::string(300, 'x') + R"(": "1"})",
       "hyperparameter `" + std::string(60, 'x') + "... (300 characters)` is not known; did you mean `max_steps`? "
       "(`train hyperparameters` lists them all)"},

      // integer.
      {"epochs a word", R"({"epochs": "ten"})", "hyperparameter `epochs`: expected a positive integer, got \"ten\""},
      {"epochs an SDK-encoded word", R"({"epochs": "\"ten\""})",
       "hyperparameter `epochs`: expected a positive integer, got \"\\\"ten\\\"\""},
      {"momentum an SDK-encoded list", R"({"momentum": "\"[0.9]\""})",
       "hyperparameter `momentum`: expected a number in [0, 1), got \"\\\"[0.9]\\\"\""},
      {"epochs zero", R"({"epochs": "0"})", "hyperparameter `epochs`: expected a positive integer, got \"0\""},
      {"epochs negative", R"({"epochs": "-3"})", "hyperparameter `epochs`: expected a positive integer, got \"-3\""},
      {"epochs a fraction", R"({"epochs": "2.5"})",
       "hyperparameter `epochs`: expected a positive integer, got \"2.5\""},
      {"epochs a boolean", R"({"epochs": "true"})",
       "hyperparameter `epochs`: expected a positive integer, got \"true\""},
      {"epochs a JSON list", R"({"epochs": []})", "hyperparameter `epochs`: expected a positive integer, got []"},
      {"epochs null", R"({"epochs": null})", "hyperparameter `epochs`: expected a positive integer, got null"},
      {"epochs beyond 64 bits", R"({"epochs": "99999999999999999999"})",
       "hyperparameter `epochs`: expected a positive integer, got \"99999999999999999999\""},
      {"epochs a huge string", R"({"epochs": ")" + std::string(5000, '1') + R"("})",
       "hyperparameter `epochs`: expected a positive integer, got \"" + std::string(59, '1') +
           "... (5002 characters)"},
      {"max_steps negative", R"({"max_steps": "-1"})",
       "hyperparameter `max_steps`: expected a non-negative integer, got \"-1\""},
      {"num_layers not a ResNet depth", R"({"num_layers": "49"})",
       "hyperparameter `num_layers`: expected one of 18, 34, 50, 101 or 152, got \"49\""},
      {"num_classes one", R"({"num_classes": "1"})",
       "hyperparameter `num_classes`: expected an integer from 2 to 1000000, got \"1\""},
      {"mini_batch_size zero", R"({"mini_batch_size": "0"})",
       "hyperparameter `mini_batch_size`: expected an integer from 1 to 1048576, got \"0\""},
      {"mini_batch_size too large", R"({"mini_batch_size": "2097152"})",
       "hyperparameter `mini_batch_size`: expected an integer from 1 to 1048576, got \"2097152\""},
      {"seed beyond 32 bits", R"({"seed": "4294967296"})",
       "hyperparameter `seed`: expected an integer from 0 to 4294967295, got \"4294967296\""},
      {"checkpoint_frequency a fraction", R"({"checkpoint_frequency": "0.5"})",
       "hyperparameter `checkpoint_frequency`: expected an integer from 0 to 1000000, got \"0.5\""},
      {"processes_per_host zero", R"({"processes_per_host": "0"})",
       "hyperparameter `processes_per_host`: expected an integer from 1 to 1024, got \"0\""},
      {"the processes alias a word", R"({"sagemaker_mpi_num_of_processes_per_host": "many"})",
       "hyperparameter `sagemaker_mpi_num_of_processes_per_host`: expected an integer from 1 to 1024, got "
       "\"many\""},

      // real.
      {"learning_rate zero (exclusive bound)", R"({"learning_rate": "0"})",
       "hyperparameter `learning_rate`: expected a number in (0, 100], got \"0\""},
      {"learning_rate a word", R"({"learning_rate": "fast"})",
       "hyperparameter `learning_rate`: expected a number in (0, 100], got \"fast\""},
      {"learning_rate NaN", R"({"learning_rate": "NaN"})",
       "hyperparameter `learning_rate`: expected a number in (0, 100], got \"NaN\""},
      {"learning_rate overflowing a double", R"({"learning_rate": "1e400"})",
       "hyperparameter `learning_rate`: expected a number in (0, 100], got \"1e400\""},
      {"learning_rate a boolean", R"({"learning_rate": true})",
       "hyperparameter `learning_rate`: expected a number in (0, 100], got true"},
      {"momentum one (exclusive bound)", R"({"momentum": "1"})",
       "hyperparameter `momentum`: expected a number in [0, 1), got \"1\""},
      {"weight_decay negative", R"({"weight_decay": "-0.0001"})",
       "hyperparameter `weight_decay`: expected a number in [0, 1], got \"-0.0001\""},
      {"label_smoothing one", R"({"label_smoothing": "1.0"})",
       "hyperparameter `label_smoothing`: expected a number in [0, 1), got \"1.0\""},
      {"lr_scheduler_factor zero", R"({"lr_scheduler_factor": "0"})",
       "hyperparameter `lr_scheduler_factor`: expected a number in (0, 1], got \"0\""},
      {"warmup_epochs negative", R"({"warmup_epochs": "-1"})",
       "hyperparameter `warmup_epochs`: expected a number in [0, 1000000], got \"-1\""},
      {"fusion_threshold_mb zero", R"({"fusion_threshold_mb": "0"})",
       "hyperparameter `fusion_threshold_mb`: expected a number in (0, 4096], got \"0\""},

      // boolean.
      {"shuffle yes", R"({"shuffle": "yes"})", "hyperparameter `shuffle`: expected true or false, got \"yes\""},
      {"shuffle one", R"({"shuffle": "1"})", "hyperparameter `shuffle`: expected true or false, got \"1\""},

      // choice.
      {"lr_scheduler unknown", R"({"lr_scheduler": "linear"})",
       "hyperparameter `lr_scheduler`: expected one of step, poly or cosine, got \"linear\""},
      {"optimizer SDK-encoded but unknown", R"({"optimizer": "\"adam\""})",
       "hyperparameter `optimizer`: expected one of sgd, nag or lars, got \"\\\"adam\\\"\""},
      {"optimizer in capitals", R"({"optimizer": "SGD"})",
       "hyperparameter `optimizer`: expected one of sgd, nag or lars, got \"SGD\""},
      {"optimizer a number", R"({"optimizer": 1})", "hyperparameter `optimizer`: expected one of sgd, nag or lars, got 1"},
      {"augmentation_type with a hyphen", R"({"augmentation_type": "crop-color"})",
       "hyperparameter `augmentation_type`: expected one of none, crop or crop_color, got \"crop-color\""},
      {"precision_dtype fp16", R"({"precision_dtype": "fp16"})",
       "hyperparameter `precision_dtype`: expected one of float32 or bfloat16, got \"fp16\""},
      {"device gpu", R"({"device": "gpu"})", "hyperparameter `device`: expected one of auto, cuda or cpu, got \"gpu\""},

      // integer_list.
      {"lr_scheduler_step decreasing", R"({"lr_scheduler_step": "60,30"})",
       "hyperparameter `lr_scheduler_step`: expected a comma-separated list of increasing positive integers such as "
       "\"30,60,80\", got \"60,30\""},
      {"lr_scheduler_step repeated", R"({"lr_scheduler_step": "30,30"})",
       "hyperparameter `lr_scheduler_step`: expected a comma-separated list of increasing positive integers such as "
       "\"30,60,80\", got \"30,30\""},
      {"lr_scheduler_step with zero", R"({"lr_scheduler_step": "0,10"})",
       "hyperparameter `lr_scheduler_step`: expected a comma-separated list of increasing positive integers such as "
       "\"30,60,80\", got \"0,10\""},
      {"lr_scheduler_step with an empty item", R"({"lr_scheduler_step": "30,,60"})",
       "hyperparameter `lr_scheduler_step`: expected a comma-separated list of increasing positive integers such as "
       "\"30,60,80\", got \"30,,60\""},
      {"lr_scheduler_step empty", R"({"lr_scheduler_step": ""})",
       "hyperparameter `lr_scheduler_step`: expected a comma-separated list of increasing positive integers such as "
       "\"30,60,80\", got \"\""},
      {"lr_scheduler_step a JSON list with a word", R"({"lr_scheduler_step": "[30, \"x\"]"})",
       "hyperparameter `lr_scheduler_step`: expected a comma-separated list of increasing positive integers such as "
       "\"30,60,80\", got \"[30, \\\"x\\\"]\""},
      {"lr_scheduler_step an empty JSON list", R"({"lr_scheduler_step": []})",
       "hyperparameter `lr_scheduler_step`: expected a comma-separated list of increasing positive integers such as "
       "\"30,60,80\", got []"},

      // image_shape.
      {"image_shape with one channel", R"({"image_shape": "1,224,224"})",
       "hyperparameter `image_shape`: expected \"3,HEIGHT,WIDTH\" with HEIGHT and WIDTH from 16 to 4096, such as "
       "\"3,224,224\", got \"1,224,224\""},
      {"image_shape with two numbers", R"({"image_shape": "3,224"})",
       "hyperparameter `image_shape`: expected \"3,HEIGHT,WIDTH\" with HEIGHT and WIDTH from 16 to 4096, such as "
       "\"3,224,224\", got \"3,224\""},
      {"image_shape too small", R"({"image_shape": "3,8,8"})",
       "hyperparameter `image_shape`: expected \"3,HEIGHT,WIDTH\" with HEIGHT and WIDTH from 16 to 4096, such as "
       "\"3,224,224\", got \"3,8,8\""},
      {"image_shape too large", R"({"image_shape": "\"3,224,5000\""})",
       "hyperparameter `image_shape`: expected \"3,HEIGHT,WIDTH\" with HEIGHT and WIDTH from 16 to 4096, such as "
       "\"3,224,224\", got \"\\\"3,224,5000\\\"\""},
      {"image_shape with x", R"({"image_shape": "3x224x224"})",
       "hyperparameter `image_shape`: expected \"3,HEIGHT,WIDTH\" with HEIGHT and WIDTH from 16 to 4096, such as "
       "\"3,224,224\", got \"3x224x224\""},

      // mpi_arguments and the aliases.
      {"custom_mpi_options with an open double quote", R"({"custom_mpi_options": "-x \"FOO=bar"})",
       "hyperparameter `custom_mpi_options`: unbalanced double quote in \"-x \\\"FOO=bar\"; close it or escape it "
       "with a backslash"},
      {"the options alias with an open single quote", R"({"sagemaker_mpi_custom_mpi_options": "--mca 'btl tcp"})",
       "hyperparameter `sagemaker_mpi_custom_mpi_options`: unbalanced single quote in \"--mca 'btl tcp\"; close it "
       "or escape it with a backslash"},
      {"processes alias disagreeing", R"({"processes_per_host": "2", "sagemaker_mpi_num_of_processes_per_host": "4"})",
       "hyperparameters `processes_per_host` and `sagemaker_mpi_num_of_processes_per_host` mean the same setting but "
       "have different values; set only one"},
      {"options alias disagreeing",
       R"({"custom_mpi_options": "-x A=1", "sagemaker_mpi_custom_mpi_options": "-x A=2"})",
       "hyperparameters `custom_mpi_options` and `sagemaker_mpi_custom_mpi_options` mean the same setting but have "
       "different values; set only one"},

      // Everything at once: one line per problem, in key order.
      {"several problems", R"({"optimizer": "adam", "epoch": "1", "learning_rate": "-1", "shuffle": "maybe"})",
       "hyperparameter `epoch` is not known; did you mean `epochs`? (`train hyperparameters` lists them all)\n"
       "hyperparameter `learning_rate`: expected a number in (0, 100], got \"-1\"\n"
       "hyperparameter `optimizer`: expected one of sgd, nag or lars, got \"adam\"\n"
       "hyperparameter `shuffle`: expected true or false, got \"maybe\""},
  };
}

}  // namespace

TEST_CASE("hyperparameters: malformed files, each with its exact message", "[hyperparameters][malformed]") {
  require_each_malformed_message(malformed_hyperparameters(), parse_text);
}

TEST_CASE("hyperparameters: read from a file", "[hyperparameters]") {
  train::testing::TempJobDir dir;
  const auto path = dir.paths().hyperparameters();
  SECTION("a missing file means every default") {
    auto hp = read_hyperparameters(path);
    CHECK(hp.epochs == 30);
    CHECK(hp.decoded() == Json::object());
  }
  SECTION("every problem line names the file") {
    dir.write_config("hyperparameters.json", R"({"epochs": "0", "optimiser": "sgd"})");
    CHECK(config_error_message([&] { read_hyperparameters(path); }) ==
          path.string() + ": hyperparameter `epochs`: expected a positive integer, got \"0\"\n" + path.string() +
              ": hyperparameter `optimiser` is not known; did you mean `optimizer`? (`train hyperparameters` lists "
              "them all)");
  }
  SECTION("a file that is not an object is named once") {
    dir.write_config("hyperparameters.json", "42");
    CHECK(config_error_message([&] { read_hyperparameters(path); }) ==
          path.string() + ": expected a JSON object mapping hyperparameter names to string values, got an integer");
  }
}
