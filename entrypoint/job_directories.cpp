#include "entrypoint/job_directories.h"

#include "common/environment_error.h"
#include "common/log.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace train {

namespace {

// errno of creating, writing and flushing a file in `directory`, or 0.
int write_probe(const std::filesystem::path& directory) {
  std::error_code created;
  std::filesystem::create_directories(directory, created);
  if (created) return created.value();
  std::string name = (directory / ".train-write-check-XXXXXX").string();
  const int fd = ::mkstemp(name.data());
  if (fd < 0) return errno;
  // A few blocks, flushed: a disk with no room left refuses them now rather than the checkpoint later.
  const std::string block(16384, '\0');
  int error = 0;
  if (!write_fully(fd, block)) error = errno;
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  ::close(fd);
  ::unlink(name.c_str());
  return error;
}

}  // namespace

std::vector<DirectoryProblem> unwritable_directories(const std::vector<std::filesystem::path>& directories) {
  std::vector<DirectoryProblem> problems;
  for (const auto& directory : directories) {
    if (int error = write_probe(directory); error != 0) problems.push_back({directory, error});
  }
  return problems;
}

std::vector<std::filesystem::path> job_output_directories(const JobPaths& paths, const OutputLocations* trained,
                                                          const EnvironmentMap& environment) {
  std::vector<std::filesystem::path> directories = {paths.model(), paths.output()};
  if (trained != nullptr) {
    directories.push_back(trained->checkpoints);
    directories.push_back(trained->tensorboard);
  }
  directories.push_back(temporary_directory(environment));
  return directories;
}

std::string describe_unwritable(const std::vector<DirectoryProblem>& problems, std::vector<std::string>& details) {
  for (const auto& problem : problems) {
    details.push_back(fmt::format("{}: {}: {}.", problem.directory.string(), std::strerror(problem.error),
                                  is_environment_errno(problem.error) ? environment_advice(problem.error)
                                                                      : std::string("check that folder")));
  }
  details.push_back("train writes the model to model/, its reports to output/ and checkpoints to checkpoints/ "
                    "under SAGEMAKER_BASE_DIR (/opt/ml), and mpirun's session files and inflated gzip shards to "
                    "$TMPDIR (/tmp when unset); nothing was trained.");
  const auto& first = problems.front();
  return fmt::format("The job cannot write its results: {} ({}){}.", first.directory.string(),
                     std::strerror(first.error),
                     problems.size() > 1 ? fmt::format(" and {} more folder{}", problems.size() - 1,
                                                       problems.size() == 2 ? "" : "s")
                                         : "");
}

}  // namespace train
