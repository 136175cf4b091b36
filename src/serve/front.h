// The front of `reel serve --replicas MIN:MAX`: one address in front of several worker
// replicas (serve/replica.h), as a Kubernetes Service and HorizontalPodAutoscaler would be.
//
//   - Balancing: each request goes to the replica with the fewest requests outstanding (ties to
//     the oldest). A replica that cannot be reached or drops the connection is skipped and the
//     request is sent to another (inference is idempotent), up to every replica once.
//   - Scaling: every period, Tick measures the load (mean requests in flight per replica, mean
//     latency) and asks the Autoscaler (serve/autoscaler.h) how many replicas to run. New ones
//     start at once; surplus ones stop taking requests, finish what they hold, then stop.
//   - Healing: a replica that died is removed and, when that leaves fewer than the autoscaler
//     wants, replaced.
//
// Routes: /v2/health/live (200), /v2/health/ready (200 while a replica serves), /metrics (the
// front's own: reel_front_*), and everything else proxied as it came.
//
// Thread-safety: handlers run concurrently; Tick runs on one thread at a time (the scaling
// loop's, or a test's).
#pragma once

#include <memory>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "http/router.h"
#include "serve/autoscaler.h"
#include "serve/replica.h"

namespace reel::serve {

struct FrontOptions {
  AutoscaleOptions scale;
  Clock::Duration period = std::chrono::seconds(2);  // between scaling decisions
  std::chrono::milliseconds request_timeout{300'000};
  std::chrono::milliseconds stop_grace{30'000};  // a stopping replica's drain before SIGKILL
};

struct TickResult {
  int replicas = 0;  // serving after this tick (not counting those draining)
  int desired = 0;
  int replaced = 0;  // dead replicas removed this tick
  LoadSample load;
};

class Front {
 public:
  // Starts min_replicas replicas. Errors: the options' and the first replica's.
  static Result<std::unique_ptr<Front>> Start(FrontOptions options, StartReplicaFn start,
                                              Clock* clock = Clock::System());
  ~Front();  // Shutdown()
  Front(const Front&) = delete;
  Front& operator=(const Front&) = delete;

  // The routes above, bound to this front (which must outlive the server).
  Status AddRoutes(http::Router* router);

  // One scaling step: reap the dead, stop drained surplus, measure, scale. A replica that fails
  // to start is logged; the next tick tries again.
  TickResult Tick();

  // Ticks every period on a thread of its own until Shutdown.
  void RunScaling();

  // Stops scaling, then stops every replica (each answers what it holds).
  void Shutdown();

  int replicas() const;  // serving now
  std::string MetricsText() const;

 private:
  struct Impl;
  explicit Front(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reel::serve
