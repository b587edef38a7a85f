// Telling a dead process's leftovers from a live one's: id, start time and PID namespace.
#include "common/process_identity.h"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

using namespace train;

TEST_CASE("process identity: this process is alive, an exited child has ended, text round trip", "[common]") {
  const ProcessIdentity self = this_process();
  CHECK(self.pid == ::getpid());
  CHECK(self.start_ticks > 0);
  CHECK_FALSE(process_has_ended(self));
  const auto parsed = ProcessIdentity::from_text(self.to_text());
  REQUIRE(parsed);
  CHECK((parsed->pid == self.pid && parsed->start_ticks == self.start_ticks && parsed->pid_namespace == self.pid_namespace));
  CHECK_FALSE(ProcessIdentity::from_text("pid=x start=1 pidns=2"));

  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  ProcessIdentity gone = self;
  gone.pid = child;
  CHECK(process_has_ended(gone));
  // The same id started at another time is another process (an id reused).
  ProcessIdentity reused = self;
  reused.start_ticks += 1;
  CHECK(process_has_ended(reused));
  // One of another PID namespace cannot be judged from here: never taken for ended.
  gone.pid_namespace += 1;
  CHECK_FALSE(process_has_ended(gone));
}
