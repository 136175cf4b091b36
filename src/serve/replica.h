// A serving replica as the front sees it: a `reel serve` worker with an address, which may die.
// StartProcessReplica runs one as a child process of this one (killed if this one dies).
//
// Errors: StartProcessReplica: Internal when the process cannot be started, Unavailable when it
// exits or prints no "listening on URL" line within `start_timeout` (its exit status named).
// Thread-safety: Alive and Stop may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace reel::serve {

class Replica {
 public:
  virtual ~Replica() = default;
  virtual const std::string& url() const = 0;  // "http://127.0.0.1:PORT"
  virtual std::string name() const = 0;        // for logs: "pid 1234"
  virtual bool Alive() = 0;                    // false once it has exited
  // SIGTERM (it stops accepting and answers what it holds), then waits; SIGKILL after `grace`.
  virtual void Stop(std::chrono::milliseconds grace) = 0;
};

using StartReplicaFn = std::function<Result<std::unique_ptr<Replica>>()>;

// `argv[0]` is the program's path; the process must print "listening on URL" as its first line
// of standard output. Its later output is copied to this process's standard error.
Result<std::unique_ptr<Replica>> StartProcessReplica(const std::vector<std::string>& argv,
                                                     std::chrono::milliseconds start_timeout);

}  // namespace reel::serve
