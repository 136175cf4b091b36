// A graceful stop asked of a long-running command by SIGTERM: a scheduler preempting it, a spot
// node being reclaimed, Kubernetes evicting its pod. The work stops at its next safe point (a
// training step), writes what it needs to resume (a checkpoint), and exits with kExitPreempted,
// which Reel's scheduler reads as "requeue me" (the code is EX_TEMPFAIL: try again later).
// Thread-safety: StopRequested may be called from any thread; the handler is async-signal-safe.
#pragma once

namespace reel {

inline constexpr int kExitPreempted = 75;

// SIGTERM sets the flag instead of ending the process. Call once, early, from main's thread.
void InstallStopRequestHandler();
bool StopRequested();
// For tests: as if SIGTERM had arrived (or not).
void SetStopRequestedForTesting(bool requested);

}  // namespace reel
