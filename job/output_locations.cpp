#include "job/output_locations.h"

#include "common/config_error.h"
#include "common/json_file.h"

#include <fmt/format.h>

#include <algorithm>

namespace train {

namespace {

// The LocalPath of `file`, or `fallback` when the file or its LocalPath is absent.
std::filesystem::path local_path(const std::filesystem::path& file, const JobPaths& paths,
                                 const std::filesystem::path& fallback) {
  std::error_code error;
  if (!std::filesystem::exists(file, error)) return fallback;
  const nlohmann::json document = read_json_file(file);
  require_json_object(document, file.string(), fmt::format("such as {{\"LocalPath\": \"{}\"}}", fallback.string()));
  auto it = document.find("LocalPath");
  if (it == document.end() || it->is_null()) return fallback;
  if (!it->is_string() || it->get_ref<const std::string&>().empty() || it->get_ref<const std::string&>()[0] != '/') {
    throw ConfigError(fmt::format("{}: \"LocalPath\": expected an absolute path such as \"{}\", got {}",
                                  file.string(),
                                  (sagemaker_base_path / fallback.lexically_relative(paths.base)).string(),
                                  describe_json_value(*it)));
  }
  const std::filesystem::path given(it->get<std::string>());
  if (auto path = paths.relocated(given)) return *path;
  // A relocated job maps /opt/ml into its own folder. A path that starts there and climbs out through ".."
  // would leave that folder (normalised first, /opt/ml/checkpoints/../../x became /x): say so rather than guess.
  throw ConfigError(fmt::format("{}: \"LocalPath\": \"{}\" leads out of /opt/ml through \"..\", and this job's "
                                "/opt/ml is {} (SAGEMAKER_BASE_DIR): name a folder under /opt/ml, or another folder "
                                "without \"..\"",
                                file.string(), given.string(), paths.base.string()));
}

}  // namespace

OutputLocations read_output_locations(const JobPaths& paths) {
  OutputLocations locations;
  ConfigProblems problems;
  try {
    locations.checkpoints = local_path(paths.checkpoint_config(), paths, paths.checkpoints());
  } catch (const ConfigError& error) {
    problems.add(error.what());
  }
  try {
    locations.tensorboard = local_path(paths.tensorboard_config(), paths, paths.tensorboard());
  } catch (const ConfigError& error) {
    problems.add(error.what());
  }
  problems.throw_if_any();
  return locations;
}

}  // namespace train
