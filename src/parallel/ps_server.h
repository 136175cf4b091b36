// A parameter server: one shard of a model's parameters and buffers (ps_plan.h says which),
// served over Reel's HTTP layer to the job's workers (ps_client.h), with the optimiser running
// here rather than on the workers.
//
// A step's protocol, for worker r at step c: pull the shard at step c, compute, push its gradient
// for step c. The two sync modes:
//   BSP  the shard sums the gradients of step c until every worker has pushed, then applies
//        their mean once (the update a data-parallel all-reduce would make) and moves to version
//        c+1; a pull of step c waits for version c.
//   SSP  (staleness s) each gradient is applied as it arrives, scaled by 1/workers; a pull of
//        step c waits only until the slowest worker has pushed step c-s-1, so no worker runs more
//        than s steps ahead of the slowest.
//
// Recovery. The shard's state (tensors, optimiser, version, each worker's pushed steps) is written
// by `snapshot` after every update, before any worker can pull it; a server killed at any moment
// restarts from its snapshot (the caller reads it back into `initial` and the tensors) without
// losing a version a worker has seen. Pushes are idempotent: one for a step the shard already
// took is answered as a duplicate. A gradient the shard took but lost with an unsnapshotted BSP
// round is asked for again: a pull whose worker has not pushed the previous step here is answered
// 409 with `X-Reel-Resend`, and the client pushes it again. A replaced worker asks each shard how
// far it got (the state endpoint) and continues from there.
//
// HTTP (binary bodies: each tensor's bytes in the shard's order, parameters then buffers):
//   GET  /ps/v1/state?worker=R        JSON {shard, version, pushed, slowest, done}
//   GET  /ps/v1/pull?worker=R&step=C  the parameters and buffers (X-Reel-Version, X-Reel-Slowest);
//                                     503 + Retry-After when still waiting after max_wait
//   POST /ps/v1/push?worker=R&step=C&finite=1   gradients then buffers; JSON {version}
//   POST /ps/v1/done?worker=R         the worker has finished
// Errors answered: 400 for a bad worker, step or body size (naming them); 409 for a step the
// shard cannot take yet; 500 when the update or snapshot fails.
//
// Thread-safety: the server's handlers run on its own threads; the tensors passed in belong to it
// until it is destroyed. Wait and state may be called from any thread.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "parallel/ps_plan.h"

namespace reel::parallel {

struct PsShardState {
  int64_t version = 0;          // updates applied
  std::vector<int64_t> pushed;  // per worker: steps whose gradient this shard has taken
  std::vector<bool> done;       // per worker: said it finished

  std::string ToJson() const;
  // DataLoss naming `what` when the text is not a state for `workers` workers.
  static Result<PsShardState> FromJson(const std::string& text, int workers,
                                       const std::string& what);
  static PsShardState Fresh(int workers);
};

struct ParameterServerOptions {
  int shard = 0;
  int workers = 1;
  PsSync sync = PsSync::kBsp;
  int staleness = 0;  // ssp only
  std::string host = "127.0.0.1";
  int port = 0;
  // A pull that cannot be answered within this is answered 503 and asked again by the client, so
  // no HTTP read times out while a worker waits for a slow one.
  std::chrono::milliseconds max_wait{20'000};
};

struct PsServerStats {
  int64_t pushes = 0, duplicates = 0, pulls = 0, resends_asked = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
};

class ParameterServer {
 public:
  // Applies one update: the shard's parameters hold the gradient to apply in .grad(); `step` is
  // the update's place on the learning-rate schedule.
  using Update = std::function<Status(int64_t step)>;
  // Writes the shard (tensors, optimiser) with this state; must be atomic.
  using Snapshot = std::function<Status(const PsShardState&)>;

  // Errors: InvalidArgument (options, tensors not contiguous CPU tensors, an `initial` state of
  // another worker count), the bind's error.
  static Result<std::unique_ptr<ParameterServer>> Start(ParameterServerOptions options,
                                                        std::vector<at::Tensor> parameters,
                                                        std::vector<at::Tensor> buffers,
                                                        PsShardState initial, Update update,
                                                        Snapshot snapshot);
  ~ParameterServer();  // stops the HTTP server, answering waiting pulls 503
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  std::string address() const;  // "127.0.0.1:port"
  // Blocks until every worker has said done (OK), or `stop` returns true (Cancelled), checking
  // it every `poll`.
  Status Wait(const std::function<bool()>& stop,
              std::chrono::milliseconds poll = std::chrono::milliseconds(200));
  PsShardState state() const;
  PsServerStats stats() const;

 private:
  struct Impl;
  explicit ParameterServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reel::parallel
