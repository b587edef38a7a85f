#include "runtime/model_io/checkpoint.h"

#include "tests/unit/test_model_io_support.h"

#include <catch2/catch.hpp>

using namespace train::model_io;
using model_io_test::ScratchDir;

namespace {

struct Fixture {
  std::vector<float> conv = std::vector<float>(8 * 3 * 3 * 3);
  std::vector<float> fc_bias = {0.25f, -0.5f};
  int64_t counter = 42;
  std::vector<float> conv_momentum = std::vector<float>(8 * 3 * 3 * 3);
  std::vector<float> fc_bias_momentum = {1e-3f, -2e-3f};

  Fixture() {
    for (size_t i = 0; i < conv.size(); ++i) {
      conv[i] = static_cast<float>(i) * 0.01f;
      conv_momentum[i] = -static_cast<float>(i) * 0.001f;
    }
  }
  std::vector<TensorView> model() const {
    return {{"conv1.weight", Dtype::F32, {8, 3, 3, 3}, conv.data()},
            {"fc.bias", Dtype::F32, {2}, fc_bias.data()},
            {"bn1.num_batches_tracked", Dtype::I64, {}, &counter}};
  }
  std::vector<TensorView> momentum() const {
    return {{"conv1.weight", Dtype::F32, {8, 3, 3, 3}, conv_momentum.data()},
            {"fc.bias", Dtype::F32, {2}, fc_bias_momentum.data()}};
  }
  static CheckpointState state() {
    CheckpointState state;
    state.step = 1234;
    state.epoch = 3;
    state.step_in_epoch = 17;
    state.world_size = 8;
    state.rng_state = "1 2 3 4 5 mt19937 state \"quoted\"";
    state.identity = {{"num_layers", 50}, {"num_classes", 2}, {"seed", 0}, {"image_shape", "3,224,224"}};
    state.version = "0.1.0";
    return state;
  }
};

}  // namespace

TEST_CASE("checkpoint: a round trip returns model, momentum and state", "[model_io]") {
  ScratchDir dir;
  Fixture fixture;
  CHECK_FALSE(read_checkpoint(dir.path()).has_value());  // none yet: a fresh start

  write_checkpoint(dir.path() / "checkpoints", Fixture::state(), fixture.model(), fixture.momentum());
  auto checkpoint = read_checkpoint(dir.path() / "checkpoints");
  REQUIRE(checkpoint.has_value());
  const auto& state = checkpoint->state;
  CHECK(state.step == 1234);
  CHECK(state.epoch == 3);
  CHECK(state.step_in_epoch == 17);
  CHECK(state.world_size == 8);
  CHECK(state.rng_state == Fixture::state().rng_state);
  CHECK(state.identity == Fixture::state().identity);
  CHECK(state.version == "0.1.0");
  REQUIRE(checkpoint->model.size() == 3);
  CHECK(checkpoint->model[0].name == "conv1.weight");
  CHECK(checkpoint->model[0].to_float() == fixture.conv);
  CHECK(checkpoint->model[2].to_int64() == std::vector<int64_t>{42});
  REQUIRE(checkpoint->momentum.size() == 2);
  CHECK(checkpoint->momentum[0].name == "conv1.weight");
  CHECK(checkpoint->momentum[0].to_float() == fixture.conv_momentum);
  CHECK(checkpoint->momentum[1].name == "fc.bias");
  CHECK(checkpoint->momentum[1].to_float() == fixture.fc_bias_momentum);

  // Stored as plain safetensors: momentum under its prefix, the state in the metadata.
  auto file = read_safetensors(checkpoint_path(dir.path() / "checkpoints").string());
  CHECK(file.find("optimizer.momentum.conv1.weight") != nullptr);
  CHECK(file.metadata.at("format") == "train checkpoint");
  CHECK(file.metadata.at("format_version") == "1");
}

TEST_CASE("checkpoint: a new checkpoint replaces the old one whole, and stale temporaries go", "[model_io]") {
  ScratchDir dir;
  Fixture fixture;
  write_checkpoint(dir.path(), Fixture::state(), fixture.model(), fixture.momentum());
  // A writer that died mid-write left a temporary file (and SageMaker may have synced it back).
  model_io_test::write_bytes(dir.file("checkpoint.safetensors.tmp-Ab3dEf"), "half a checkpoint");
  CHECK(read_checkpoint(dir.path())->state.step == 1234);  // the reader ignores it

  auto state = Fixture::state();
  state.step = 2000;
  state.epoch = 4;
  state.step_in_epoch = 0;
  write_checkpoint(dir.path(), state, fixture.model(), fixture.momentum());
  CHECK(read_checkpoint(dir.path())->state.step == 2000);
  CHECK(dir.entries() == std::set<std::string>{"checkpoint.safetensors"});
}

TEST_CASE("checkpoint: the writer refuses inconsistent input", "[model_io]") {
  ScratchDir dir;
  Fixture fixture;
  auto momentum = fixture.momentum();
  momentum[1].shape = {1, 2};
  CHECK_THROWS_WITH(write_checkpoint(dir.path(), Fixture::state(), fixture.model(), momentum),
                    "checkpoint: momentum \"fc.bias\" [1, 2] matches no model tensor of that name and shape");
  auto model = fixture.model();
  model[0].name = "optimizer.step";
  CHECK_THROWS_WITH(write_checkpoint(dir.path(), Fixture::state(), model, {}),
                    "checkpoint: model tensor \"optimizer.step\": names starting with \"optimizer.\" are reserved");
  auto state = Fixture::state();
  state.rng_state = "\xff\xfe";
  CHECK_THROWS_WITH(write_checkpoint(dir.path(), state, fixture.model(), {}),
                    Catch::Matchers::StartsWith("checkpoint state cannot be written: "));
  CHECK(dir.entries().empty());
}

TEST_CASE("checkpoint: a damaged or foreign file is reported, not skipped", "[model_io]") {
  ScratchDir dir;
  const std::string path = checkpoint_path(dir.path()).string();
  float value = 1.0f;

  write_safetensors(path, {{"w", Dtype::F32, {}, &value}});
  CHECK_THROWS_WITH(read_checkpoint(dir.path()),
                    path + ": not a train checkpoint (its metadata has no \"format\": \"train checkpoint\")");

  write_safetensors(path, {{"w", Dtype::F32, {}, &value}}, {{"format", "train checkpoint"}, {"format_version", "2"}});
  CHECK_THROWS_WITH(read_checkpoint(dir.path()), path + ": checkpoint format version 2, this train reads version 1");

  write_safetensors(path, {{"w", Dtype::F32, {}, &value}},
                    {{"format", "train checkpoint"}, {"format_version", "1"}, {"state", "{\"step\": 1}"}});
  CHECK_THROWS_WITH(read_checkpoint(dir.path()), Catch::Matchers::StartsWith(path + ": invalid checkpoint state: "));

  Fixture fixture;
  write_checkpoint(dir.path(), Fixture::state(), fixture.model(), fixture.momentum());
  std::string bytes = model_io_test::read_bytes(path);
  model_io_test::write_bytes(path, bytes.substr(0, bytes.size() - 4));
  CHECK_THROWS_WITH(read_checkpoint(dir.path()),
                    path + ": tensor \"optimizer.momentum.fc.bias\": data_offsets [1744, 1752] reach beyond the end "
                           "of the data (1748 bytes)");

  const std::string state = R"({"step": 1, "epoch": 0, "step_in_epoch": 0, "world_size": 1, "rng_state": "",
                                 "identity": {}, "fingerprint": "fnv1a64:08f44b07b5901a25"})";
  write_safetensors(path, {{"optimizer.momentum.w", Dtype::F32, {}, &value}},
                    {{"format", "train checkpoint"}, {"format_version", "1"}, {"state", state}});
  CHECK_THROWS_WITH(read_checkpoint(dir.path()),
                    path + ": tensor \"optimizer.momentum.w\": momentum for no model tensor of shape []");

  std::string tampered = state;
  tampered.replace(tampered.find("08f4"), 4, "0000");
  write_safetensors(path, {{"w", Dtype::F32, {}, &value}},
                    {{"format", "train checkpoint"}, {"format_version", "1"}, {"state", tampered}});
  CHECK_THROWS_WITH(read_checkpoint(dir.path()),
                    path + ": invalid checkpoint state: fingerprint fnv1a64:00004b07b5901a25 does not match its "
                           "identity (fnv1a64:08f44b07b5901a25)");
}

TEST_CASE("checkpoint: a job resumes only a checkpoint of the same hyperparameters", "[model_io]") {
  auto state = Fixture::state();
  CHECK_FALSE(resume_refusal(state, state.identity, "ckpt").has_value());
  auto other = state.identity;
  other["num_classes"] = 10;
  other.erase("seed");
  other["label_smoothing"] = 0.1;
  CHECK(resume_refusal(state, other, "ckpt") ==
        "ckpt was written by a job with other hyperparameters (label_smoothing (absent) there, 0.1 here; "
        "num_classes 2 there, 10 here; seed 0 there, (absent) here), so this job cannot resume from it; remove it, "
        "or give this job a checkpoint location of its own");
}

TEST_CASE("checkpoint: the identity fingerprint is FNV-1a of the canonical JSON", "[model_io]") {
  // Python: h=0xcbf29ce484222325; for b in b'{}': h=((h^b)*0x100000001b3)%2**64
  CHECK(identity_fingerprint(nlohmann::json::object()) == "fnv1a64:08f44b07b5901a25");
  // Key order does not matter: nlohmann::json sorts keys.
  CHECK(identity_fingerprint({{"b", 1}, {"a", 2}}) == identity_fingerprint({{"a", 2}, {"b", 1}}));
  CHECK(identity_fingerprint({{"a", 1}}) != identity_fingerprint({{"a", 2}}));
}
