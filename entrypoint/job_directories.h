// The folders a job writes its results to, checked before anything trains: a read-only model/ found only
// when the model is written wastes the whole training, and a read-only output/ leaves no report at all.
#pragma once

#include "common/environment_map.h"
#include "common/paths.h"
#include "common/temporary_directory.h"  // temporary_directory: $TMPDIR, one of the folders checked
#include "job/output_locations.h"

#include <filesystem>
#include <string>
#include <vector>

namespace train {

struct DirectoryProblem {
  std::filesystem::path directory;
  int error = 0;  // errno: ENOSPC, EROFS, EACCES, ...
};

// Creates each of `directories` when missing and writes, flushes and removes a small file in it; returns
// the ones where that failed, with the errno.
std::vector<DirectoryProblem> unwritable_directories(const std::vector<std::filesystem::path>& directories);

// The folders a job writes: model/ and output/ of `paths`; when train trains, the checkpoint and TensorBoard
// folders of `trained` (where checkpointconfig.json and tensorboardoutputconfig.json put them; a user's
// command under `train -- CMD` decides for itself what it writes: null); and $TMPDIR (mpirun's session
// directory: a full one fails MPI_Init with nothing but PMIx errors; the inflated gzip shards).
std::vector<std::filesystem::path> job_output_directories(const JobPaths& paths, const OutputLocations* trained,
                                                          const EnvironmentMap& environment);

// The failure file's first line and details for `problems` (not empty).
std::string describe_unwritable(const std::vector<DirectoryProblem>& problems, std::vector<std::string>& details);

}  // namespace train
