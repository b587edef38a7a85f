/* libtrain_signal_witness.so: who sent mpirun the signal that ended it. SIGTERM, SIGINT or SIGHUP sent to
 * mpirun itself (not through train) make it end the ranks and exit with code 1, without a word: the job's
 * report said only "mpirun exited with code 1" (issue 31). Preloaded into mpirun alone by the launcher
 * (entrypoint/launcher.cpp), it wraps the handlers mpirun installs for those three signals; when one comes,
 * it appends a line to the file TRAIN_SIGNAL_WITNESS names (in the launcher's folder for its ranks' reasons)
 *
 *     signal=15 pid=4321 uid=0 code=0 monotonic_ns=123456789 command=kill
 *
 * and then runs mpirun's own handler, so mpirun does what it always does. The launcher reads the file when
 * mpirun has ended (entrypoint/mpirun_signals.cpp).
 *
 * At start it takes itself out of the environment (LD_PRELOAD back to TRAIN_SIGNAL_WITNESS_PRELOAD, the value
 * the launcher was given; both variables removed), so nothing mpirun starts (ranks, ssh, Open MPI's daemons)
 * carries it. Without TRAIN_SIGNAL_WITNESS it does nothing. Only async-signal-safe calls in the handler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIGNAL 65

static char witness_file[4096]; /* "" when not witnessing */
static struct sigaction programs_action[MAX_SIGNAL]; /* mpirun's own action for each wrapped signal */
static volatile sig_atomic_t wrapped[MAX_SIGNAL];

typedef int (*sigaction_function)(int, const struct sigaction*, struct sigaction*);

static sigaction_function next_sigaction(void) {
  static sigaction_function next;
  if (next == NULL) next = (sigaction_function)dlsym(RTLD_NEXT, "sigaction");
  return next;
}

static int witnessed(int signal_number) {
  return witness_file[0] != '\0' && (signal_number == SIGTERM || signal_number == SIGINT || signal_number == SIGHUP);
}

__attribute__((constructor)) static void start_witnessing(void) {
  const char* file = getenv("TRAIN_SIGNAL_WITNESS");
  if (file == NULL || file[0] == '\0') return;
  if (strlen(file) < sizeof witness_file) strcpy(witness_file, file);
  const char* preload = getenv("TRAIN_SIGNAL_WITNESS_PRELOAD");
  if (preload != NULL && preload[0] != '\0') {
    setenv("LD_PRELOAD", preload, 1);
  } else {
    unsetenv("LD_PRELOAD");
  }
  unsetenv("TRAIN_SIGNAL_WITNESS");
  unsetenv("TRAIN_SIGNAL_WITNESS_PRELOAD");
}

/* Appends "NAME=VALUE " with VALUE in decimal to `line` at `*at`. */
static void put_number(char* line, size_t* at, size_t size, const char* name, long long value) {
  char digits[24];
  size_t count = 0;
  unsigned long long magnitude = value < 0 ? (unsigned long long)(-value) : (unsigned long long)value;
  do {
    digits[count++] = (char)('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude > 0 && count < sizeof digits);
  for (const char* c = name; *c != '\0' && *at < size; ++c) line[(*at)++] = *c;
  if (*at < size) line[(*at)++] = '=';
  if (value < 0 && *at < size) line[(*at)++] = '-';
  while (count > 0 && *at < size) line[(*at)++] = digits[--count];
  if (*at < size) line[(*at)++] = ' ';
}

static void witness(int signal_number, const siginfo_t* info) {
  char line[256];
  size_t at = 0;
  const size_t room = sizeof line - 1; /* the newline */
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  put_number(line, &at, room, "signal", signal_number);
  put_number(line, &at, room, "pid", info != NULL ? info->si_pid : 0);
  put_number(line, &at, room, "uid", info != NULL ? (long long)info->si_uid : 0);
  put_number(line, &at, room, "code", info != NULL ? info->si_code : 0);
  put_number(line, &at, room, "monotonic_ns", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
  for (const char* c = "command="; *c != '\0' && at < room; ++c) line[at++] = *c;
  if (info != NULL && info->si_pid > 0) {
    /* /proc/PID/comm of the sender, while it most likely still runs */
    char path[40] = "/proc/";
    size_t path_at = 6;
    char digits[24];
    size_t count = 0;
    for (unsigned long value = (unsigned long)info->si_pid; value > 0; value /= 10) {
      digits[count++] = (char)('0' + value % 10);
    }
    while (count > 0) path[path_at++] = digits[--count];
    memcpy(path + path_at, "/comm", 6);
    int comm = open(path, O_RDONLY | O_CLOEXEC);
    if (comm >= 0) {
      ssize_t got = read(comm, line + at, room - at);
      close(comm);
      for (ssize_t i = 0; i < got && line[at] != '\n'; ++i) ++at;
    }
  }
  line[at++] = '\n';
  int fd = open(witness_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  ssize_t ignored = write(fd, line, at);
  (void)ignored;
  close(fd);
}

static void witness_then_run_programs_handler(int signal_number, siginfo_t* info, void* context) {
  int saved = errno;
  witness(signal_number, info);
  errno = saved;
  const struct sigaction* program = &programs_action[signal_number];
  if (program->sa_flags & SA_SIGINFO) {
    program->sa_sigaction(signal_number, info, context);
  } else if (program->sa_handler != SIG_IGN && program->sa_handler != SIG_DFL) {
    program->sa_handler(signal_number);
  }
}

static int installs_a_function(const struct sigaction* action) {
  return (action->sa_flags & SA_SIGINFO) || (action->sa_handler != SIG_IGN && action->sa_handler != SIG_DFL);
}

int sigaction(int signal_number, const struct sigaction* action, struct sigaction* previous) {
  sigaction_function next = next_sigaction();
  if (next == NULL) {
    errno = ENOSYS;
    return -1;
  }
  if (signal_number <= 0 || signal_number >= MAX_SIGNAL || !witnessed(signal_number)) {
    return next(signal_number, action, previous);
  }
  /* The program sees its own actions, never the wrapper. */
  const struct sigaction programs_previous = programs_action[signal_number];
  const int was_wrapped = wrapped[signal_number];
  int result;
  if (action == NULL || !installs_a_function(action)) {
    result = next(signal_number, action, previous);
    if (result == 0 && action != NULL) wrapped[signal_number] = 0;
  } else {
    struct sigaction wrapper = *action;
    wrapper.sa_sigaction = witness_then_run_programs_handler;
    wrapper.sa_flags |= SA_SIGINFO;
    programs_action[signal_number] = *action;
    result = next(signal_number, &wrapper, previous);
    if (result == 0) {
      wrapped[signal_number] = 1;
    } else {
      programs_action[signal_number] = programs_previous;
    }
  }
  if (result == 0 && previous != NULL && was_wrapped) *previous = programs_previous;
  return result;
}

/* glibc's signal(): BSD semantics (the handler stays, interrupted calls restart), the signal blocked in its
 * handler. */
sighandler_t signal(int signal_number, sighandler_t handler) {
  if (signal_number <= 0 || signal_number >= MAX_SIGNAL || !witnessed(signal_number)) {
    sighandler_t (*next)(int, sighandler_t) = (sighandler_t(*)(int, sighandler_t))dlsym(RTLD_NEXT, "signal");
    if (next == NULL) {
      errno = ENOSYS;
      return SIG_ERR;
    }
    return next(signal_number, handler);
  }
  struct sigaction action;
  struct sigaction previous;
  memset(&action, 0, sizeof action);
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, signal_number);
  action.sa_flags = SA_RESTART;
  if (sigaction(signal_number, &action, &previous) != 0) return SIG_ERR;
  return previous.sa_handler;
}
