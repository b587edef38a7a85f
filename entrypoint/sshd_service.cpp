#include "entrypoint/sshd_service.h"

#include "common/log.h"
#include "entrypoint/child_process.h"
#include "entrypoint/network_probe.h"

#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <pwd.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace train {
namespace {

// sshd needs well under a second to listen; a loaded host may need more. ssh-keygen makes an ed25519
// key in milliseconds.
constexpr auto sshd_start_limit = std::chrono::seconds(20);
constexpr auto keygen_limit = std::chrono::seconds(20);

// Where sshd looks for host keys when its configuration names none.
const char* const default_host_keys[] = {"/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_ecdsa_key",
                                         "/etc/ssh/ssh_host_rsa_key"};

// Makes this container's own host key when the image has none (docker/Dockerfile removes the ones made at
// build time, which every container of the image would share). ssh clients of the job do not check host
// keys (hosts' names and keys change with every job), so this keeps the image's private keys out of
// reach rather than authenticating hosts.
void make_host_key_if_none(const EnvironmentMap& environment, JobWaiter& waiter) {
  std::error_code ignored;
  for (const char* key : default_host_keys) {
    if (std::filesystem::exists(key, ignored)) return;
  }
  SpawnOptions options;
  options.capture_output = false;
  options.die_with_parent = true;
  const pid_t pid = spawn_child({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "train host key", "-f",
                                 default_host_keys[0]},
                                environment, options)
                        .pid;
  const auto deadline = std::chrono::steady_clock::now() + keygen_limit;
  while (true) {
    if (auto status = waiter.exit_status(pid)) {
      if (exit_code_from_wait_status(*status) == 0) break;
      throw std::runtime_error(fmt::format("the image has no SSH host key and ssh-keygen {} making {} (its messages "
                                           "are above)",
                                           describe_wait_status(*status), default_host_keys[0]));
    }
    if (std::chrono::steady_clock::now() > deadline || !waiter.pause(std::chrono::milliseconds(50))) {
      ::kill(pid, SIGKILL);  // the job's final sweep reaps it
      throw std::runtime_error(fmt::format("ssh-keygen did not make {} within {} s", default_host_keys[0],
                                           keygen_limit.count()));
    }
  }
  log_info("made this host's SSH host key {}", default_host_keys[0]);
}

// The user mpirun logs in as: the one train runs as, on every host of the job.
std::string user_name() {
  const passwd* entry = ::getpwuid(::geteuid());
  return entry && entry->pw_name && entry->pw_name[0] ? entry->pw_name : "root";
}

// An sshd that keeps dying has a reason that starting it again will not cure.
constexpr int restart_limit = 5;

}  // namespace

SshdService::SshdService(const MultiHostSettings& settings, const std::string& address,
                         const std::vector<std::string>& allowed_from, const EnvironmentMap& environment,
                         JobWaiter& waiter) {
  const auto probe_timeout = std::chrono::milliseconds(1000);
  if (ssh_answers(address, settings.ssh_port, probe_timeout)) {
    log_info("an sshd already answers on {}:{}; using it (train limits where an sshd it starts listens and whom it "
             "lets in, not this one's)",
             address, settings.ssh_port);
    return;
  }
  if (settings.sshd == "none") {
    throw std::runtime_error(fmt::format(
        "nothing answers SSH on {}:{} and TRAIN_SSHD=none says the image starts its own sshd; start sshd in the "
        "image or unset TRAIN_SSHD so that train starts /usr/sbin/sshd",
        address, settings.ssh_port));
  }
  // Debian's sshd refuses to start without its privilege separation directory, which only its init
  // script creates; a container has no init.
  std::error_code ignored;
  std::filesystem::create_directories("/run/sshd", ignored);
  make_host_key_if_none(environment, waiter);
  // ListenAddress and AllowUsers given here add to any in the image's configuration (docker/sshd_config
  // has none): the job's interface only, and this user only from the addresses that log in here.
  std::vector<std::string> allowed;
  for (const auto& from : allowed_from) allowed.push_back(fmt::format("{}@{}", user_name(), from));
  command_ = {settings.sshd, "-D", "-e", "-o", "LogLevel=ERROR", "-o", "ListenAddress=" + address, "-o",
              fmt::format("AllowUsers={}", fmt::join(allowed, " "))};
  environment_ = environment;
  spawn();
  log_info("started {} (pid {}) on {}:{}, letting {} in from {} only; waiting for it to answer", settings.sshd, pid_,
           address, settings.ssh_port, user_name(), fmt::join(allowed_from, ", "));
  const auto deadline = std::chrono::steady_clock::now() + sshd_start_limit;
  std::string why_not;
  while (!ssh_answers(address, settings.ssh_port, probe_timeout, &why_not)) {
    if (auto status = waiter.exit_status(pid_)) {
      pid_ = -1;
      throw std::runtime_error(fmt::format(
          "sshd {} (its messages are above); the image needs openssh-server with host keys in /etc/ssh",
          describe_wait_status(*status)));
    }
    // sshd listens within tens of milliseconds: asking every 20 ms takes its answer when it comes.
    if (std::chrono::steady_clock::now() > deadline || !waiter.pause(std::chrono::milliseconds(20))) {
      throw std::runtime_error(fmt::format("sshd did not answer on {}:{} within {} s ({})", address, settings.ssh_port,
                                           sshd_start_limit.count(), why_not));
    }
  }
}

SshdService::~SshdService() { stop(); }

// The command is sshd -D (in the foreground, as our child) -e (messages to our stderr, which SageMaker keeps)
// at LogLevel=ERROR (or every connection, mpirun's and the workers' probes of the master, would add log
// lines), with its listen address and allowed users.
void SshdService::spawn() {
  SpawnOptions options;
  options.capture_output = false;
  options.die_with_parent = true;
  pid_ = spawn_child(command_, environment_, options).pid;
}

bool SshdService::restart_if_ours(pid_t pid, int status) {
  if (pid <= 0 || pid != pid_) return false;
  pid_ = -1;
  const std::string how = describe_wait_status(status);
  if (restarts_ >= restart_limit) {
    death_ = fmt::format("This host's sshd {} after being started again {} times, so it was left dead: the workers "
                         "judge the master alive by its sshd, and gave up on it.",
                         how, restarts_);
    log_error("{}", death_);
    return true;
  }
  try {
    spawn();
    ++restarts_;
    log_info("sshd (pid {}) {}; starting it again (pid {}): the workers judge this host alive by its answer", pid,
             how, pid_);
  } catch (const std::exception& error) {
    death_ = fmt::format("This host's sshd {} and could not be started again ({}): the workers judge the master "
                         "alive by its sshd, and gave up on it.",
                         how, error.what());
    log_error("{}", death_);
  }
  return true;
}

void SshdService::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  // sshd ends at once on SIGTERM; the job's final sweep reaps it (and kills it if it does not end).
  pid_ = -1;
}

}  // namespace train
