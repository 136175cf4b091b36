// Finding the job scheduler from the command line (reel jobs, reel nodes, reel pipeline run
// --scheduler): a URL, or the daemon serving a state folder, started in the background for this
// machine when none answers there (its log: STATE/scheduler.log).
#pragma once

#include <string>

#include "base/status.h"

namespace reel::cli {

// `url` when not empty (of a comma-separated list, the daemon leading: standbys name the leader
// in /healthz, and a takeover is waited out for up to 15 s); else the daemon of `state` (made
// absolute). Errors: Unavailable when a daemon started for `state` does not answer; Internal when
// it cannot be started.
Result<std::string> SchedulerUrl(const std::string& url, const std::string& state);

}  // namespace reel::cli
