/* libtrain_job_host_name.so: gethostname() answers with the job's host name (SageMaker's current_host, such
 * as "algo-1") instead of the container's. The SageMaker training toolkit preloads a library of its own
 * (gethostname.c, read from resourceconfig.json) into every rank its MPI runner starts, so that a program
 * that names its host by gethostname() (Python's socket.gethostname(), Horovod, many logging setups) sees
 * the name the job's other hosts know it by. `train -- CMD` preloads this one into the command's ranks of a
 * SageMaker job (entrypoint/rank_exec.cpp); it answers from SM_CURRENT_HOST, which rank-exec sets to this
 * host's current_host. Without that variable it is the C library's own gethostname(). uname() is left as it
 * is, as under the toolkit.
 *
 * The library is found beside the train executable (the image installs both in /usr/local/bin). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gethostname(char* name, size_t len) {
  const char* host = getenv("SM_CURRENT_HOST");
  if (host == NULL || host[0] == '\0') {
    int (*next)(char*, size_t) = (int (*)(char*, size_t))dlsym(RTLD_NEXT, "gethostname");
    if (next == NULL) {
      errno = ENOSYS;
      return -1;
    }
    return next(name, len);
  }
  /* As glibc's own: copy what fits, and say ENAMETOOLONG when the name with its NUL does not. */
  size_t size = strlen(host) + 1;
  memcpy(name, host, len < size ? len : size);
  if (size > len) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return 0;
}
