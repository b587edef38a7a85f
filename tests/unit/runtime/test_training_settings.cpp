// What the training loop derives from the job for Pipe mode and ShardedByS3Key: the FIFOs, the
// dealing ranks, and the clear refusals of what Pipe mode cannot do.
#include "job/job_description.h"
#include "runtime/training_settings.h"
#include "tests/unit/job_files_fixture.h"

#include <catch2/catch.hpp>

using namespace train;
using train::testing::config_error_message;
using train::testing::TempJobDir;

namespace {

const HostResources cpu_host{.gpus = 0, .cpus = 8, .gpu_note = "built without CUDA"};

TrainingSettings settings_for(const TempJobDir& dir, const RankIdentity& identity) {
  auto job = load_job_description(dir.paths(), {}, cpu_host, CheckMode::this_host);
  return derive_training_settings(job, identity);
}

}  // namespace

TEST_CASE("training settings: a Pipe-mode channel streams from <channel>_N FIFOs", "[training_settings]") {
  TempJobDir dir;
  dir.write_config("hyperparameters.json", R"({"num_training_samples": "1000", "num_classes": "10",
                                               "processes_per_host": "2", "mini_batch_size": "8"})");
  dir.write_config("inputdataconfig.json", R"({"train": {"TrainingInputMode": "Pipe", "RecordWrapperType": "RecordIO",
                                                         "S3DistributionType": "ShardedByS3Key"}})");
  const auto settings = settings_for(dir, RankIdentity{.rank = 1, .size = 2, .local_rank = 1, .local_size = 2});
  CHECK(settings.pipe);
  CHECK(settings.pipe_fifo_prefix == dir.root() / "input/data/train");
  CHECK(settings.pipe_unwrap_recordio);
  CHECK(settings.sharded);
  CHECK(settings.data_rank == 1);
  CHECK(settings.data_ranks == 2);
  CHECK(settings.num_training_samples == 1000);
}

TEST_CASE("training settings: FullyReplicated deals over all ranks, ShardedByS3Key over the host's", "[training_settings]") {
  TempJobDir dir;
  dir.write_config("hyperparameters.json", R"({"processes_per_host": "2", "mini_batch_size": "8"})");
  dir.write_config("inputdataconfig.json", R"({"train": {}})");
  dir.make_channel_dir("train");
  const RankIdentity identity{.rank = 3, .size = 4, .local_rank = 1, .local_size = 2};
  auto full = settings_for(dir, identity);
  CHECK_FALSE(full.sharded);
  CHECK(full.data_rank == 3);
  CHECK(full.data_ranks == 4);
  dir.write_config("inputdataconfig.json", R"({"train": {"S3DistributionType": "ShardedByS3Key"}})");
  auto sharded = settings_for(dir, identity);
  CHECK(sharded.sharded);
  CHECK(sharded.data_rank == 1);
  CHECK(sharded.data_ranks == 2);
}

TEST_CASE("training settings: the data loader decodes with the rank's share of the host's cores", "[training_settings]") {
  TempJobDir dir;
  dir.write_config("hyperparameters.json", R"({"data_format": "synthetic", "num_classes": "10", "processes_per_host": "2", "mini_batch_size": "8"})");
  CHECK(settings_for(dir, RankIdentity{.rank = 0, .size = 2, .local_rank = 0, .local_size = 2}).loader_threads == 4);
}
