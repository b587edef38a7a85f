#include "entrypoint/sshd_service.h"

#include "common/log.h"
#include "entrypoint/child_process.h"
#include "entrypoint/network_probe.h"

#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <stdexcept>
#include <sys/wait.h>

namespace train {
namespace {

// sshd needs well under a second to listen; a loaded host may need more.
constexpr auto sshd_start_limit = std::chrono::seconds(20);
// An sshd that keeps dying has a reason that starting it again will not cure.
constexpr int restart_limit = 5;

}  // namespace

SshdService::SshdService(const MultiHostSettings& settings, const std::string& address,
                         const EnvironmentMap& environment, JobWaiter& waiter) {
  const auto probe_timeout = std::chrono::milliseconds(1000);
  if (ssh_answers(address, settings.ssh_port, probe_timeout)) {
    log_info("an sshd already answers on {}:{}; using it", address, settings.ssh_port);
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
  program_ = settings.sshd;
  environment_ = environment;
  spawn();
  log_info("started {} (pid {}); waiting for it to answer on {}:{}", settings.sshd, pid_, address, settings.ssh_port);
  const auto deadline = std::chrono::steady_clock::now() + sshd_start_limit;
  std::string why_not;
  while (!ssh_answers(address, settings.ssh_port, probe_timeout, &why_not)) {
    if (auto status = waiter.exit_status(pid_)) {
      pid_ = -1;
      throw std::runtime_error(fmt::format(
          "sshd {} (its messages are above); the image needs openssh-server with host keys in /etc/ssh",
          describe_wait_status(*status)));
    }
    if (std::chrono::steady_clock::now() > deadline || !waiter.pause(std::chrono::milliseconds(200))) {
      throw std::runtime_error(fmt::format("sshd did not answer on {}:{} within {} s ({})", address, settings.ssh_port,
                                           sshd_start_limit.count(), why_not));
    }
  }
}

SshdService::~SshdService() { stop(); }

void SshdService::spawn() {
  // -D: stay in the foreground as our child; -e: messages to our stderr, which SageMaker keeps; errors
  // only, or every connection (mpirun's, and the workers' probes of the master) would add log lines.
  SpawnOptions options;
  options.capture_output = false;
  options.die_with_parent = true;
  pid_ = spawn_child({program_, "-D", "-e", "-o", "LogLevel=ERROR"}, environment_, options).pid;
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
