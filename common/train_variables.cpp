#include "common/train_variables.h"

#include <algorithm>

#include "common/config_error.h"
#include "common/log.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <iterator>
#include <optional>

namespace train {

namespace {

struct IntegerRule {
  IntegerVariable variable;
  const char* name;
  int64_t fallback;
  int64_t minimum;
  int64_t maximum;
  const char* unit;  // what it counts ("seconds"), or "" for a port
};

constexpr int64_t ten_days = 864000;

// Timeouts start at 1 (0 would fail every such wait at once); the stop grace and the master's linger may be 0.
constexpr IntegerRule integer_rules[] = {
    {IntegerVariable::stop_grace_seconds, "TRAIN_STOP_GRACE_SECONDS", 100, 0, 999999, "seconds"},
    {IntegerVariable::step_timeout_seconds, "TRAIN_STEP_TIMEOUT_SECONDS", 900, 1, 9999999, "seconds"},
    {IntegerVariable::data_timeout_seconds, "TRAIN_DATA_TIMEOUT_SECONDS", 600, 1, 9999999, "seconds"},
    {IntegerVariable::resolve_timeout_seconds, "TRAIN_RESOLVE_TIMEOUT_SECONDS", 300, 1, ten_days, "seconds"},
    {IntegerVariable::peers_timeout_seconds, "TRAIN_PEERS_TIMEOUT_SECONDS", 600, 1, ten_days, "seconds"},
    {IntegerVariable::ranks_timeout_seconds, "TRAIN_RANKS_TIMEOUT_SECONDS", 900, 1, ten_days, "seconds"},
    {IntegerVariable::master_lost_seconds, "TRAIN_MASTER_LOST_SECONDS", 30, 1, ten_days, "seconds"},
    {IntegerVariable::master_linger_seconds, "TRAIN_MASTER_LINGER_SECONDS", 5, 0, ten_days, "seconds"},
    {IntegerVariable::registration_timeout_seconds, "TRAIN_REGISTRATION_TIMEOUT_SECONDS", 600, 1, ten_days, "seconds"},
    // SageMaker's longest MaxRuntimeInSeconds, 28 days, is also the most.
    {IntegerVariable::idle_host_timeout_seconds, "TRAIN_IDLE_HOST_TIMEOUT_SECONDS", 2419200, 1, 2419200, "seconds"},
    // Script mode's code: its download and unpacking, and pip (entrypoint/user_code/).
    {IntegerVariable::code_fetch_timeout_seconds, "TRAIN_CODE_FETCH_TIMEOUT_SECONDS", 1800, 1, ten_days, "seconds"},
    {IntegerVariable::code_install_timeout_seconds, "TRAIN_CODE_INSTALL_TIMEOUT_SECONDS", 3600, 1, ten_days, "seconds"},
    {IntegerVariable::registration_port, "TRAIN_REGISTRATION_PORT", 7627, 1, 65535, ""},
    {IntegerVariable::ssh_port, "TRAIN_SSH_PORT", 22, 1, 65535, ""},
    {IntegerVariable::straggler_intervals, "TRAIN_STRAGGLER_INTERVALS", 3, 1, 999999, "log intervals"},
};

const IntegerRule& rule_of(IntegerVariable variable) {
  for (const auto& rule : integer_rules) {
    if (rule.variable == variable) return rule;
  }
  throw std::logic_error("a TRAIN_* variable without a rule in common/train_variables.cpp");
}

std::string expected_text(const IntegerRule& rule) {
  return fmt::format("a whole number{}{} from {} to {} such as {}", *rule.unit ? " of " : "", rule.unit, rule.minimum,
                     rule.maximum, rule.fallback);
}

struct FlagRule {
  FlagVariable variable;
  const char* name;
  const char* when_unset;                 // what leaving it unset gives, for the message
  const char* old_name = nullptr;         // its former name, still read when `name` is unset (deprecated)
};
constexpr FlagRule flag_rules[] = {
    {FlagVariable::shared_gradient_buffers, "TRAIN_SHARED_GRADIENT_BUFFERS", "the reference path", "TRAIN_FAST_PATH"},
    {FlagVariable::ranks_share_gpus, "TRAIN_RANKS_SHARE_GPUS", "one GPU per rank"},
};

// The former name, read when the new one is unset, says once per process what it is called now (users'
// scripts set it).
std::optional<std::string> lookup_flag(const EnvironmentMap& environment, const FlagRule& rule, const char*& name) {
  name = rule.name;
  auto value = lookup(environment, rule.name);
  if ((value && !value->empty()) || rule.old_name == nullptr) return value;
  auto old_value = lookup(environment, rule.old_name);
  if (!old_value || old_value->empty()) return value;
  name = rule.old_name;
  static std::atomic<bool> told{false};
  if (!told.exchange(true)) log_info("{} is deprecated: it is now {} (the same values)", rule.old_name, rule.name);
  return old_value;
}

constexpr const char* straggler_factor_name = "TRAIN_STRAGGLER_FACTOR";
constexpr double straggler_factor_default = 1.5;

}  // namespace

void add_new_names_of_former_variables(EnvironmentMap& environment) {
  for (const FlagRule& rule : flag_rules) {
    if (rule.old_name == nullptr || lookup(environment, rule.name).value_or("").size() > 0) continue;
    const char* name = nullptr;
    if (auto value = lookup_flag(environment, rule, name); value && !value->empty()) environment[rule.name] = *value;
  }
}

int64_t read_integer_variable(const EnvironmentMap& environment, IntegerVariable variable) {
  const IntegerRule& rule = rule_of(variable);
  return whole_number_from_environment(environment, rule.name, rule.minimum, rule.maximum, expected_text(rule))
      .value_or(rule.fallback);
}

std::chrono::seconds read_seconds_variable(const EnvironmentMap& environment, IntegerVariable variable) {
  return std::chrono::seconds(read_integer_variable(environment, variable));
}

bool read_flag_variable(const EnvironmentMap& environment, FlagVariable variable) {
  const FlagRule& rule = *std::find_if(std::begin(flag_rules), std::end(flag_rules),
                                         [&](const FlagRule& r) { return r.variable == variable; });
  const char* name = nullptr;
  auto value = lookup_flag(environment, rule, name);
  if (!value || value->empty()) return false;
  if (*value != "0" && *value != "1") {
    throw ConfigError(fmt::format("environment variable {}: expected 0 or 1, got \"{}\"; unset it for {}", name,
                                  *value, rule.when_unset));
  }
  return *value == "1";
}

double read_straggler_factor_variable(const EnvironmentMap& environment) {
  auto factor = lookup(environment, straggler_factor_name);
  if (!factor) return straggler_factor_default;
  char* end = nullptr;
  const double value = std::strtod(factor->c_str(), &end);
  if (end == factor->c_str() || *end != '\0' || !(value > 1.0) || value > 1000.0) {
    throw ConfigError(fmt::format("environment variable {}: expected a number above 1 and at most 1000 such as 1.5, "
                                  "got \"{}\"",
                                  straggler_factor_name, *factor));
  }
  return value;
}

std::vector<std::string> train_variable_problems(const EnvironmentMap& environment) {
  std::vector<std::string> problems;
  auto check = [&](auto&& read) {
    try {
      read();
    } catch (const ConfigError& error) {
      problems.emplace_back(error.what());
    }
  };
  for (const auto& rule : integer_rules) check([&] { read_integer_variable(environment, rule.variable); });
  for (const auto& rule : flag_rules) check([&] { read_flag_variable(environment, rule.variable); });
  check([&] { read_straggler_factor_variable(environment); });
  return problems;
}

std::vector<VariableDefault> checked_train_variables() {
  std::vector<VariableDefault> variables;
  for (const auto& rule : integer_rules) variables.push_back({rule.name, std::to_string(rule.fallback)});
  for (const auto& rule : flag_rules) variables.push_back({rule.name, "0"});
  variables.push_back({straggler_factor_name, fmt::format("{}", straggler_factor_default)});
  return variables;
}

}  // namespace train
