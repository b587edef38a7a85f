// What sagemaker_submit_directory names: S3, a local file or folder, or the code folder itself.
#include "entrypoint/user_code/code_source.h"
#include "entrypoint/user_code/user_code_error.h"
#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <fstream>

using namespace train::user_code;
using train::JobPaths;
using train::testing::TempFolder;

namespace {

std::string refusal(const std::string& given, const JobPaths& paths) {
  try {
    classify_code_source(given, paths);
  } catch (const UserCodeError& error) {
    CHECK(error.exit_code == 65);
    return error.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("user code: the submit directory's kinds", "[user_code]") {
  TempFolder folder("train-code-source");
  JobPaths paths;
  paths.base = folder.path() / "opt-ml";
  std::filesystem::create_directories(paths.base / "input" / "data" / "code");
  std::ofstream(paths.base / "input" / "data" / "code" / "sourcedir.tar.gz") << "x";
  std::filesystem::create_directories(folder.path() / "src");

  CHECK(classify_code_source("", paths).kind == SourceKind::code_folder);
  // The code folder need not exist yet; named through /opt/ml under a relocated base it is the job's own.
  CHECK(classify_code_source("/opt/ml/code", paths).kind == SourceKind::code_folder);
  std::filesystem::create_directories(paths.code());
  CHECK(classify_code_source("/opt/ml/code/", paths).kind == SourceKind::code_folder);
  CHECK(classify_code_source(paths.code().string(), paths).kind == SourceKind::code_folder);

  auto s3 = classify_code_source("s3://bucket/job/source/sourcedir.tar.gz", paths);
  CHECK(s3.kind == SourceKind::s3_object);
  CHECK(s3.given == "s3://bucket/job/source/sourcedir.tar.gz");

  auto channel = classify_code_source("/opt/ml/input/data/code/sourcedir.tar.gz", paths);
  CHECK(channel.kind == SourceKind::local_file);
  CHECK(channel.path == paths.base / "input" / "data" / "code" / "sourcedir.tar.gz");

  auto other = classify_code_source((folder.path() / "src").string(), paths);
  CHECK(other.kind == SourceKind::local_folder);
  CHECK(other.path == folder.path() / "src");
}

TEST_CASE("user code: what cannot name the code is refused, saying what can", "[user_code]") {
  TempFolder folder("train-code-source");
  JobPaths paths;
  paths.base = folder.path();
  const std::string expected = "expected s3://BUCKET/KEY (the SDK's sourcedir.tar.gz), the absolute path of a "
                               "local .tar.gz, or a local folder, got ";
  CHECK_THAT(refusal("s3://bucket", paths), Catch::Contains(expected + "\"s3://bucket\": an S3 URI names a bucket"));
  CHECK_THAT(refusal("s3://bucket/", paths), Catch::Contains("an S3 URI names a bucket and a key"));
  CHECK_THAT(refusal("s3:///key", paths), Catch::Contains("an S3 URI names a bucket and a key"));
  CHECK_THAT(refusal("file:///opt/ml/code", paths), Catch::Contains("from S3 or from this container's own files"));
  CHECK_THAT(refusal("code/sourcedir.tar.gz", paths), Catch::Contains("a local path must be absolute"));
  CHECK_THAT(refusal("/opt/ml/../../etc", paths), Catch::Contains("leads out of /opt/ml through \"..\""));
  CHECK_THAT(refusal((folder.path() / "missing.tar.gz").string(), paths), Catch::Contains("does not exist"));
  CHECK_THAT(refusal("/dev/null", paths), Catch::Contains("is neither a file nor a folder"));
}
