// What every host must agree on: each difference from the master's account named, with the values as they
// are on each side; the account shrinks to a checksum per section when it would not fit a variable.
#include "job/host_agreement.h"

#include "job/hyperparameters.h"
#include "tests/unit/temp_folder.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <unistd.h>

using namespace train;
using Catch::Contains;

namespace {

JobDescription job_with(nlohmann::json hyperparameters = nlohmann::json::object(),
                        nlohmann::json channels = nlohmann::json::object(),
                        std::string current_host = "algo-3") {
  JobDescription job;
  job.cluster.hosts = {"algo-1", "algo-2", "algo-3"};
  job.cluster.master_host = "algo-1";
  job.cluster.current_host = std::move(current_host);
  // A user's command takes any keys (train's own training only its schema's).
  job.hyperparameters = parse_hyperparameters(hyperparameters, "hyperparameters.json", Workload::user_command);
  job.input = parse_input_data_config(channels, "inputdataconfig.json");
  return job;
}

std::vector<std::string> differences(const JobDescription& master, const JobDescription& mine,
                                     const std::vector<std::string>& program = {}) {
  return host_differences(encode_host_agreement(host_agreement_items(master, program)),
                          host_agreement_items(mine, program), "algo-1", "algo-3");
}

}  // namespace

TEST_CASE("host agreement: the same job description agrees", "[host_agreement]") {
  const auto job = job_with({{"epochs", "3"}, {"learning_rate", "0.1"}}, {{"train", {{"TrainingInputMode", "File"}}}});
  CHECK(differences(job, job).empty());
}

TEST_CASE("host agreement: each hyperparameter that differs, is missing or is extra, in words", "[host_agreement]") {
  const auto master = job_with({{"epochs", "3"}, {"learning_rate", "0.1"}, {"momentum", "0.9"}});
  const auto mine = job_with({{"epochs", "3"}, {"learning_rate", "0.2"}, {"seed", "7"}});
  CHECK(differences(master, mine) ==
        std::vector<std::string>{
            R"(hyperparameter "learning_rate" is 0.2 on algo-3 and 0.1 on the master algo-1)",
            R"(hyperparameter "momentum" is 0.9 on the master algo-1 and absent on algo-3)",
            R"(hyperparameter "seed" is 7 on algo-3 and absent on the master algo-1)"});
}

TEST_CASE("host agreement: a channel delivered otherwise", "[host_agreement]") {
  const auto master = job_with(nlohmann::json::object(), {{"train", {{"TrainingInputMode", "File"}}}});
  const auto mine = job_with(nlohmann::json::object(), {{"train", {{"TrainingInputMode", "Pipe"}, {"S3DistributionType", "ShardedByS3Key"}}}});
  CHECK(differences(master, mine) ==
        std::vector<std::string>{R"(channel "train" is "Pipe ShardedByS3Key RecordWrapperType None" on algo-3 and )"
                                 R"("File FullyReplicated RecordWrapperType None" on the master algo-1)"});
}

TEST_CASE("host agreement: values are shown short and in ASCII", "[host_agreement]") {
  const auto master = job_with({{"note", std::string(200, 'x')}});
  const auto mine = job_with({{"note", "größe"}});
  const auto found = differences(master, mine);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == R"(hyperparameter "note" is "gr\u00f6\u00dfe" on algo-3 and ")" + std::string(56, 'x') +
                        "... on the master algo-1");
}

TEST_CASE("host agreement: the program's first file is its code, later words are not", "[host_agreement]") {
  testing::TempFolder folder("train-host-agreement-test");
  const auto script = (folder.path() / "run.sh").string();
  std::ofstream(script) << "echo one\n";
  const auto job = job_with();
  const auto data = (folder.path() / "data.txt").string();
  std::ofstream(data) << "this host's\n";
  const std::vector<std::string> program{"/bin/sh", script, "--not-a-file", data};  // sh: PATH's
  const std::string masters = encode_host_agreement(host_agreement_items(job, program));
  std::ofstream(data) << "another host's\n";  // a later word: the job's data, not its code
  CHECK(host_differences(masters, host_agreement_items(job, program), "algo-1", "algo-3").empty());
  std::ofstream(script) << "echo two\n";
  const auto found = host_differences(masters, host_agreement_items(job, program), "algo-1", "algo-3");
  REQUIRE(found.size() == 1);
  CHECK_THAT(found[0], Contains("the program's file \"" + script + "\" is 9 bytes with checksum "));
  CHECK_THAT(found[0], Contains(" on algo-3 and 9 bytes with checksum "));
}

TEST_CASE("host agreement: an account too large for a variable still names the section", "[host_agreement]") {
  nlohmann::json many = nlohmann::json::object();
  for (int i = 0; i < 3000; ++i) many["channel-" + std::to_string(i)] = {{"TrainingInputMode", "File"}};
  const auto master = job_with({{"epochs", "3"}}, many);
  const std::string text = encode_host_agreement(host_agreement_items(master, {}));
  CHECK(text.size() <= 32 * 1024);
  many["channel-7"] = {{"TrainingInputMode", "Pipe"}};
  const auto found = host_differences(text, host_agreement_items(job_with({{"epochs", "3"}}, many), {}), "algo-1",
                                      "algo-3");
  REQUIRE(found.size() == 1);
  CHECK_THAT(found[0], Catch::StartsWith("the channels differ between algo-3 and the master algo-1 (checksums "));
}

TEST_CASE("host agreement: the message for the report, and nothing on the master or without an account",
          "[host_agreement]") {
  const auto master = job_with({{"learning_rate", "0.1"}}, nlohmann::json::object(), "algo-1");
  const auto mine = job_with({{"learning_rate", "0.2"}, {"momentum", "0.5"}});
  const EnvironmentMap environment{{host_agreement_variable, encode_host_agreement(host_agreement_items(master, {}))}};
  const auto message = host_disagreement(mine, environment, {});
  REQUIRE(message);
  CHECK(message->substr(0, message->find('\n')) ==
        R"(Host algo-3's job description differs from the master algo-1's: hyperparameter "learning_rate" is 0.2 )"
        R"(on algo-3 and 0.1 on the master algo-1 (and 1 more below).)");
  CHECK_THAT(*message, Contains("\nhyperparameter \"momentum\" is 0.5 on algo-3 and absent on the master algo-1.\n"));
  CHECK_FALSE(host_disagreement(master, environment, {}));  // the master is the reference
  CHECK_FALSE(host_disagreement(mine, {}, {}));             // one host: no account exported
  CHECK_FALSE(host_disagreement(mine, {{host_agreement_variable, "not json"}}, {}));
}
