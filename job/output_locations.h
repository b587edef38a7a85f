// Where the job's checkpoints and TensorBoard files go. SageMaker's CheckpointConfig and
// TensorBoardOutputConfig may move them from /opt/ml/checkpoints and /opt/ml/output/tensorboard: it then
// writes input/config/checkpointconfig.json and tensorboardoutputconfig.json, each with a `LocalPath`,
// and syncs that folder with S3.
#pragma once

#include "common/paths.h"

#include <filesystem>

namespace train {

struct OutputLocations {
  std::filesystem::path checkpoints;
  std::filesystem::path tensorboard;
};

// The defaults, or each file's LocalPath. A LocalPath under /opt/ml follows SAGEMAKER_BASE_DIR (paths.base)
// as every other /opt/ml path does. Throws ConfigError for a file that is not JSON or whose LocalPath is not
// an absolute path, and, in a job so relocated, for a LocalPath written under /opt/ml that climbs out of it
// through ".." (it would lead out of the job's folder).
OutputLocations read_output_locations(const JobPaths& paths);

}  // namespace train
