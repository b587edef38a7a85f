#include "runtime/model_io/checkpoint.h"

#include "tests/unit/test_model_io_support.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>

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
  CHECK(file.metadata.at("format_version") == "2");
  CHECK(file.metadata.count("tensor_crc32") == 1);
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
  // The one it replaced is kept as the previous checkpoint; older ones go.
  CHECK(dir.entries() == std::set<std::string>{"checkpoint.safetensors", "checkpoint.previous.safetensors"});
  CHECK(parse_checkpoint(model_io_test::read_bytes(previous_checkpoint_path(dir.path()).string()), "previous")
            .state.step == 1234);
  state.step = 3000;
  write_checkpoint(dir.path(), state, fixture.model(), fixture.momentum());
  CHECK(read_checkpoint(dir.path())->state.step == 3000);
  CHECK(parse_checkpoint(model_io_test::read_bytes(previous_checkpoint_path(dir.path()).string()), "previous")
            .state.step == 2000);
  CHECK(dir.entries().size() == 2);
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

  write_safetensors(path, {{"w", Dtype::F32, {}, &value}}, {{"format", "train checkpoint"}, {"format_version", "3"}});
  CHECK_THROWS_WITH(read_checkpoint(dir.path()),
                    path + ": checkpoint format version 3, this train reads versions 1 and 2");

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

TEST_CASE("checkpoint: JSON nested 100,000 deep in the metadata's strings is a damaged file, not a crash",
          "[model_io]") {
  // Issue 31: the header's own nesting is bounded (test_safetensors.cpp); the state and the checksums are JSON
  // held in metadata strings, and the state's identity was copied and dumped recursively.
  ScratchDir dir;
  const std::string path = checkpoint_path(dir.path()).string();
  float value = 1.0f;
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const std::string state = R"({"step": 1, "epoch": 0, "step_in_epoch": 0, "world_size": 1, "rng_state": "",
                                 "identity": {"a": )" + deep + R"(}, "fingerprint": "fnv1a64:08f44b07b5901a25"})";
  write_safetensors(path, {{"w", Dtype::F32, {}, &value}},
                    {{"format", "train checkpoint"}, {"format_version", "1"}, {"state", state}});
  CHECK_THROWS_WITH(read_checkpoint(dir.path()),
                    path + ": invalid checkpoint state: it nests lists and objects more than 64 levels deep");
  write_safetensors(path, {{"w", Dtype::F32, {}, &value}}, {{"tensor_crc32", "{\"w\": " + deep + "}"}});
  CHECK_THROWS_WITH(read_safetensors(path), path + ": the metadata's \"tensor_crc32\" is not a JSON object of "
                                                   "checksums: the file is damaged");
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

namespace {

// Flips one bit of the byte at `offset` from the end of the file at `path`.
void flip_bit(const std::string& path, size_t offset_from_end) {
  std::string bytes = model_io_test::read_bytes(path);
  bytes[bytes.size() - offset_from_end] ^= 0x40;
  model_io_test::write_bytes(path, bytes);
}

}  // namespace

TEST_CASE("checkpoint: a flipped bit in a tensor is found by its checksum and named", "[model_io]") {
  ScratchDir dir;
  Fixture fixture;
  write_checkpoint(dir.path(), Fixture::state(), fixture.model(), fixture.momentum());
  const std::string path = checkpoint_path(dir.path()).string();
  // The last 8 bytes are the momentum of fc.bias: a float's exponent there.
  flip_bit(path, 2);
  CHECK_THROWS_WITH(read_checkpoint(dir.path()),
                    Catch::Matchers::StartsWith(path + ": tensor \"optimizer.momentum.fc.bias\": its bytes do not "
                                                       "match the checksum stored with them (CRC-32 stored ") &&
                        Catch::Matchers::EndsWith("the file is damaged"));

  // A version-2 checkpoint whose checksums were removed is refused too.
  float value = 1.0f;
  const std::string state = R"({"step": 1, "epoch": 0, "step_in_epoch": 0, "world_size": 1, "rng_state": "",
                                 "identity": {}, "fingerprint": "fnv1a64:08f44b07b5901a25"})";
  write_safetensors(path, {{"w", Dtype::F32, {}, &value}},
                    {{"format", "train checkpoint"}, {"format_version", "2"}, {"state", state}});
  CHECK_THROWS_WITH(read_checkpoint(dir.path()), Catch::Matchers::StartsWith(path + ": the metadata has no "
                                                                                    "\"tensor_crc32\""));
  // Version 1 (before checksums) is still read.
  write_safetensors(path, {{"w", Dtype::F32, {}, &value}},
                    {{"format", "train checkpoint"}, {"format_version", "1"}, {"state", state}});
  CHECK(read_checkpoint(dir.path())->state.step == 1);
}

TEST_CASE("checkpoint: a job resumes from the newest whole checkpoint, else says what to delete", "[model_io]") {
  ScratchDir dir;
  Fixture fixture;
  CHECK_FALSE(choose_checkpoint(dir.path()).found_any());  // none: a fresh start

  auto state = Fixture::state();
  write_checkpoint(dir.path(), state, fixture.model(), fixture.momentum());
  state.step = 2000;
  write_checkpoint(dir.path(), state, fixture.model(), fixture.momentum());
  const std::string newest = checkpoint_path(dir.path()).string();
  const std::string previous = previous_checkpoint_path(dir.path()).string();

  auto choice = choose_checkpoint(dir.path());
  REQUIRE(choice.bytes.has_value());
  CHECK(choice.path == newest);
  CHECK(choice.rejected.empty());
  CHECK(parse_checkpoint(*choice.bytes, "chosen").state.step == 2000);

  // Damage in the newest: the previous one is chosen, and the damage named (file and tensor).
  flip_bit(newest, 2);
  choice = choose_checkpoint(dir.path());
  REQUIRE(choice.bytes.has_value());
  CHECK(choice.path == previous);
  CHECK(parse_checkpoint(*choice.bytes, "chosen").state.step == 1234);
  REQUIRE(choice.rejected.size() == 1);
  CHECK_THAT(choice.rejected[0], Catch::Matchers::StartsWith(newest + ": tensor \"optimizer.momentum.fc.bias\""));

  // Set aside, the damaged file no longer stands in the way of the next checkpoint keeping the good one.
  CHECK(set_aside_damaged_checkpoint(dir.path()) == dir.path() / "checkpoint.damaged.safetensors");
  CHECK(choose_checkpoint(dir.path()).path == previous);
  write_checkpoint(dir.path(), state, fixture.model(), fixture.momentum());
  CHECK(parse_checkpoint(model_io_test::read_bytes(previous), "previous").state.step == 1234);
  CHECK(set_aside_damaged_checkpoint(dir.path()) == dir.path() / "checkpoint.damaged.safetensors");

  // A crash between keeping the previous one and renaming the new one into place: only the previous is left.
  CHECK(choose_checkpoint(dir.path()).path == previous);

  // Both damaged: nothing is chosen; the message names both files and what to delete.
  write_checkpoint(dir.path(), state, fixture.model(), fixture.momentum());
  flip_bit(newest, 2);
  flip_bit(previous, 2);
  choice = choose_checkpoint(dir.path());
  CHECK_FALSE(choice.bytes.has_value());
  CHECK(choice.found_any());
  REQUIRE(choice.rejected.size() == 2);
  const std::string message = no_usable_checkpoint_message(dir.path(), choice.rejected);
  CHECK_THAT(message, Catch::Matchers::StartsWith("no checkpoint in " + dir.path().string() +
                                                  " can be resumed from: " + newest + ": tensor ") &&
                          Catch::Matchers::Contains("; " + previous + ": tensor ") &&
                          Catch::Matchers::Contains("Delete the damaged files to start training afresh (rm " +
                                                    dir.path().string() + "/checkpoint*.safetensors)"));

  // Something that is not a file in a checkpoint's place is refused, not waited on.
  std::filesystem::remove(newest);
  REQUIRE(::mkfifo(newest.c_str(), 0600) == 0);
  choice = choose_checkpoint(dir.path());
  REQUIRE_FALSE(choice.rejected.empty());
  CHECK(choice.rejected[0] == newest + ": not a regular file but a FIFO (named pipe)");
}
