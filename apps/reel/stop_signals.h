// The servers' (`reel registry serve`, `reel serve`) way to stop: SIGINT and SIGTERM are
// blocked in every thread and received by one sigwait, so a signal never lands in a handler
// thread half-way through a request.
#pragma once

#include <signal.h>

namespace reel::cli {

// Blocks SIGINT and SIGTERM in this thread and every thread started after it. Call first.
inline sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Waits for one of them; returns "SIGINT" or "SIGTERM".
inline const char* WaitForStopSignal(const sigset_t& stop) {
  int signal = 0;
  sigwait(&stop, &signal);
  return signal == SIGINT ? "SIGINT" : "SIGTERM";
}

}  // namespace reel::cli
