#include "job/output_locations.h"

#include "common/config_error.h"
#include "common/json_file.h"

#include <fmt/format.h>

namespace train {

namespace {

const std::filesystem::path sagemaker_base = "/opt/ml";

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
                                  file.string(), (sagemaker_base / fallback.lexically_relative(paths.base)).string(),
                                  describe_json_value(*it)));
  }
  std::filesystem::path path = std::filesystem::path(it->get<std::string>()).lexically_normal();
  auto relative = path.lexically_relative(sagemaker_base);
  if (paths.base != sagemaker_base && !relative.empty() && *relative.begin() != "..") return paths.base / relative;
  return path;
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
