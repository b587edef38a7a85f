#include "entrypoint/user_code/code_source.h"

#include "common/exit_codes.h"
#include "entrypoint/user_code/user_code_error.h"

#include <fmt/format.h>

#include <system_error>

namespace train::user_code {

namespace {

constexpr const char* expected_text =
    "expected s3://BUCKET/KEY (the SDK's sourcedir.tar.gz), the absolute path of a local .tar.gz, or a local "
    "folder";

UserCodeError refusal(const std::string& given, const std::string& problem) {
  return UserCodeError(exit_code::invalid_job,
                       fmt::format("hyperparameter sagemaker_submit_directory: {}, got \"{}\"{}", expected_text,
                                   given, problem.empty() ? "" : ": " + problem));
}

}  // namespace

CodeSource classify_code_source(const std::string& submit_directory, const JobPaths& paths) {
  CodeSource source;
  source.given = submit_directory;
  if (submit_directory.empty()) {
    source.kind = SourceKind::code_folder;
    source.path = paths.code();
    return source;
  }
  if (submit_directory.rfind("s3://", 0) == 0) {
    const std::string rest = submit_directory.substr(5);
    const size_t slash = rest.find('/');
    if (slash == 0 || slash == std::string::npos || slash + 1 == rest.size()) {
      throw refusal(submit_directory, "an S3 URI names a bucket and a key");
    }
    source.kind = SourceKind::s3_object;
    return source;
  }
  if (submit_directory.find("://") != std::string::npos) {
    throw refusal(submit_directory, "train fetches code from S3 or from this container's own files only");
  }
  if (submit_directory.front() != '/') throw refusal(submit_directory, "a local path must be absolute");
  auto local = paths.relocated(submit_directory);
  if (!local) {
    throw refusal(submit_directory, fmt::format("it leads out of /opt/ml through \"..\", and this job's /opt/ml is "
                                                "{} (SAGEMAKER_BASE_DIR)",
                                                paths.base.string()));
  }
  source.path = *local;
  // "/opt/ml/code/" names the code folder as "/opt/ml/code" does.
  if (!source.path.has_filename() && source.path.has_relative_path()) source.path = source.path.parent_path();
  std::error_code error;
  const auto status = std::filesystem::status(source.path, error);
  if (std::filesystem::is_directory(status)) {
    std::error_code same_error;
    const bool same = std::filesystem::equivalent(source.path, paths.code(), same_error);
    source.kind = same || source.path == paths.code() ? SourceKind::code_folder : SourceKind::local_folder;
    return source;
  }
  if (std::filesystem::is_regular_file(status)) {
    source.kind = SourceKind::local_file;
    return source;
  }
  if (!std::filesystem::exists(status)) {
    // The code folder itself need not exist yet: the toolkit makes it (and then finds no program in it).
    if (source.path == paths.code()) {
      source.kind = SourceKind::code_folder;
      return source;
    }
    throw refusal(submit_directory, fmt::format("{} does not exist{}", source.path.string(),
                                                error ? fmt::format(" ({})", error.message()) : ""));
  }
  throw refusal(submit_directory, fmt::format("{} is neither a file nor a folder", source.path.string()));
}

}  // namespace train::user_code
