// The least a checkpoint takes, for the launcher's check of the file-size limit: torchvision's ResNet-18 has
// 11,689,512 parameters (1000 classes) and 20 batch norms over 4,800 channels, and a checkpoint holds each
// parameter twice (the weight, the momentum) in float32, each norm's running mean and variance in float32 and
// its num_batches_tracked in int64.
#include "runtime/rank_main.h"

#include "job/hyperparameters.h"

#include <catch2/catch.hpp>

using namespace train;

namespace {

JobDescription job_with(nlohmann::json hyperparameters) {
  JobDescription job;
  job.hyperparameters = parse_hyperparameters(hyperparameters, "hyperparameters.json", Workload::train_resnet);
  return job;
}

}  // namespace

TEST_CASE("checkpoint size: ResNet-18's tensors, and the least when the data decides the classes", "[checkpoint_size]") {
  const uint64_t buffers = 4800 * 2 * 4 + 20 * 8;
  CHECK(least_checkpoint_bytes(job_with({{"num_layers", "18"}, {"num_classes", "1000"}})) ==
        11'689'512ull * 2 * 4 + buffers);
  // One class: fc is 512 weights and a bias.
  CHECK(least_checkpoint_bytes(job_with({{"num_layers", "18"}})) ==
        (11'689'512ull - 512'000 - 1000 + 512 + 1) * 2 * 4 + buffers);
  // ResNet-50 (25,557,032 parameters) is larger still.
  CHECK(least_checkpoint_bytes(job_with({{"num_layers", "50"}, {"num_classes", "1000"}})) > 25'557'032ull * 8);
}
