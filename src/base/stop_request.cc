#include "base/stop_request.h"

#include <signal.h>

#include <atomic>

namespace reel {
namespace {

std::atomic<bool> g_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void OnTerm(int) { g_requested.store(true, std::memory_order_relaxed); }

}  // namespace

void InstallStopRequestHandler() {
  struct sigaction action {};
  action.sa_handler = OnTerm;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

bool StopRequested() { return g_requested.load(std::memory_order_relaxed); }

void SetStopRequestedForTesting(bool requested) { g_requested.store(requested); }

}  // namespace reel
