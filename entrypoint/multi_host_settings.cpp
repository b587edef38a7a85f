#include "entrypoint/multi_host_settings.h"

#include "common/config_error.h"

#include <fmt/format.h>

namespace train {
namespace {

int read_whole_number(const EnvironmentMap& environment, const char* name, int fallback, int minimum, int maximum,
                      const char* example) {
  const auto number = whole_number_from_environment(
      environment, name, minimum, maximum, fmt::format("a whole number from {} to {} such as {}", minimum, maximum, example));
  return number ? static_cast<int>(*number) : fallback;
}

std::chrono::seconds read_seconds(const EnvironmentMap& environment, const char* name, std::chrono::seconds fallback) {
  return std::chrono::seconds(read_whole_number(environment, name, static_cast<int>(fallback.count()), 0, 864000,
                                                std::to_string(fallback.count()).c_str()));
}

}  // namespace

MultiHostSettings multi_host_settings_from_environment(const EnvironmentMap& environment) {
  MultiHostSettings settings;
  settings.resolve_timeout = read_seconds(environment, "TRAIN_RESOLVE_TIMEOUT_SECONDS", settings.resolve_timeout);
  settings.peers_timeout = read_seconds(environment, "TRAIN_PEERS_TIMEOUT_SECONDS", settings.peers_timeout);
  settings.ranks_timeout = read_seconds(environment, "TRAIN_RANKS_TIMEOUT_SECONDS", settings.ranks_timeout);
  settings.master_lost_timeout =
      read_seconds(environment, "TRAIN_MASTER_LOST_SECONDS", settings.master_lost_timeout);
  settings.idle_timeout = std::chrono::seconds(read_whole_number(environment, "TRAIN_IDLE_HOST_TIMEOUT_SECONDS",
                                                                 static_cast<int>(settings.idle_timeout.count()), 0,
                                                                 static_cast<int>(settings.idle_timeout.count()), "86400"));
  settings.master_linger = read_seconds(environment, "TRAIN_MASTER_LINGER_SECONDS", settings.master_linger);
  settings.registration_timeout =
      read_seconds(environment, "TRAIN_REGISTRATION_TIMEOUT_SECONDS", settings.registration_timeout);
  settings.registration_port =
      read_whole_number(environment, "TRAIN_REGISTRATION_PORT", settings.registration_port, 1, 65535, "7627");
  settings.ssh_port = read_whole_number(environment, "TRAIN_SSH_PORT", settings.ssh_port, 1, 65535, "22");
  if (auto sshd = lookup(environment, "TRAIN_SSHD")) settings.sshd = *sshd;
  return settings;
}

}  // namespace train
