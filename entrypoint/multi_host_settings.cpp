#include "entrypoint/multi_host_settings.h"

#include "common/train_variables.h"

namespace train {

MultiHostSettings multi_host_settings_from_environment(const EnvironmentMap& environment) {
  MultiHostSettings settings;
  settings.resolve_timeout = read_seconds_variable(environment, IntegerVariable::resolve_timeout_seconds);
  settings.peers_timeout = read_seconds_variable(environment, IntegerVariable::peers_timeout_seconds);
  settings.ranks_timeout = read_seconds_variable(environment, IntegerVariable::ranks_timeout_seconds);
  settings.master_lost_timeout = read_seconds_variable(environment, IntegerVariable::master_lost_seconds);
  settings.idle_timeout = read_seconds_variable(environment, IntegerVariable::idle_host_timeout_seconds);
  settings.master_linger = read_seconds_variable(environment, IntegerVariable::master_linger_seconds);
  settings.registration_timeout = read_seconds_variable(environment, IntegerVariable::registration_timeout_seconds);
  settings.registration_port = static_cast<int>(read_integer_variable(environment, IntegerVariable::registration_port));
  settings.ssh_port = static_cast<int>(read_integer_variable(environment, IntegerVariable::ssh_port));
  if (auto sshd = lookup(environment, "TRAIN_SSHD")) settings.sshd = *sshd;
  return settings;
}

}  // namespace train
