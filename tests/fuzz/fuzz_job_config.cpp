// libFuzzer target for the job description parsers: any bytes go through parse_json_text and then through
// each of the three file parsers. A ConfigError is the expected answer to bad input; any other exception,
// a crash, a sanitizer report, or a message that is not printable UTF-8 is a bug.
#include "common/config_error.h"
#include "common/json_file.h"
#include "job/hyperparameters.h"
#include "job/input_data_config.h"
#include "job/platform_keys.h"
#include "job/resource_config.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_job_config: %s: %s\n", what, detail.c_str());
  std::abort();
}

// A message goes to logs and to /opt/ml/output/failure: it must be valid UTF-8 and not empty.
void check_message(const train::ConfigError& error) {
  const std::string message = error.what();
  if (message.empty()) bug("empty ConfigError message", "");
  if (train::escape_invalid_utf8(message) != message) bug("ConfigError message is not valid UTF-8", message);
}

template <typename Parse>
void expect_only_config_errors(const char* parser, Parse&& parse) {
  try {
    parse();
  } catch (const train::ConfigError& error) {
    check_message(error);
  } catch (const std::exception& error) {
    bug(parser, std::string("unexpected exception: ") + error.what());
  } catch (...) {
    bug(parser, "unexpected non-standard exception");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json document;
  bool parsed = false;
  expect_only_config_errors("parse_json_text", [&] {
    document = train::parse_json_text(text, "fuzz.json");
    parsed = true;
  });
  if (!parsed) return 0;

  expect_only_config_errors("parse_resource_config", [&] {
    auto config = train::parse_resource_config(document, "resourceconfig.json");
    if (config.hosts.empty() || config.current_host.empty()) bug("parse_resource_config", "accepted no hosts");
  });
  expect_only_config_errors("parse_hyperparameters", [&] {
    auto hyperparameters = train::parse_hyperparameters(document, "hyperparameters.json");
    // Accepted values must be readable: every schema value, the split MPI options, the decoded document.
    (void)hyperparameters.effective().dump();
    try {
      (void)hyperparameters.custom_mpi_words();
    } catch (const train::ConfigError& error) {
      bug("custom_mpi_options", std::string("accepted options that do not split: ") + error.what());
    }
    (void)hyperparameters.decoded().dump(-1, ' ', true, nlohmann::json::error_handler_t::strict);
    try {
      (void)hyperparameters.mpi_options();
    } catch (const train::ConfigError& error) {
      bug("mpi_options", std::string("accepted options the toolkit's reading refuses: ") + error.what());
    }
    train::ConfigProblems problems;  // the platform's keys: problems are collected, never thrown here
    (void)train::read_platform_settings(hyperparameters.decoded(), problems);
  });
  expect_only_config_errors("parse_hyperparameters (a user command's)", [&] {
    auto hyperparameters = train::parse_hyperparameters(document, "hyperparameters.json", train::Workload::user_command);
    (void)hyperparameters.effective().dump();
  });
  expect_only_config_errors("parse_input_data_config", [&] {
    auto config = train::parse_input_data_config(document, "inputdataconfig.json");
    for (const auto& channel : config.channels) {
      if (!train::is_valid_channel_name(channel.name)) bug("parse_input_data_config", "accepted " + channel.name);
    }
  });
  return 0;
}
