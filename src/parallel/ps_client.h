// A worker's side of the parameter servers (ps_server.h): pulls every shard into the model's
// tensors before a step and pushes the step's gradients (and buffers) to every shard after it.
//
// Servers are found through `lookup` (shard -> "host:port"); a server that cannot be reached, or
// that says it is busy, is asked again (its address looked up again: a restarted server listens
// elsewhere) until `timeout` has passed without an answer, so a server killed and restarted by
// the launcher costs the workers a wait, not the job. A pull answered "resend" (the shard lost a
// gradient this worker pushed, with the round it restarted before) pushes the kept gradient again.
//
// Errors: Unavailable naming the shard and its address when it stays unreachable past the
// timeout; the server's error otherwise (a body of the wrong size, a step it cannot take).
// The worker's tensors may live on an accelerator: they go through host memory on the wire.
// Thread-safety: one PsClient per worker, used from the training thread.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "http/message.h"
#include "parallel/world.h"

namespace c10d {
class Store;
}

namespace reel::parallel {

struct PsShardTensors {  // what one server holds, in its order
  std::vector<at::Tensor> parameters, buffers;
};

using PsAddressLookup = std::function<Result<std::string>(int shard)>;

struct PsClientOptions {
  int worker = 0;
  // How long a server may stay unreachable or busy before a call fails.
  std::chrono::milliseconds timeout{300'000};
};

struct PsClientStats {
  uint64_t bytes_sent = 0, bytes_received = 0;
  double wait_s = 0;          // in pulls (waiting for other workers included)
  int64_t max_staleness = 0;  // the most steps this worker ran ahead of the slowest
  int64_t retries = 0;        // calls asked again (unreachable or busy servers)
  int64_t resends = 0;        // gradients pushed again on a shard's request
};

class PsClient {
 public:
  static Result<std::unique_ptr<PsClient>> Make(PsClientOptions options,
                                                std::vector<PsShardTensors> shards,
                                                PsAddressLookup lookup);
  ~PsClient();

  // The first step whose gradient not every shard has (0 for a new job): where a worker that
  // replaces a dead one continues.
  Result<int64_t> ResumeStep();
  // Every shard's parameters and buffers for `step`, copied into the tensors.
  Status Pull(int64_t step);
  // The parameters' .grad() (zeros where undefined) and the buffers, as `step`'s push. `finite`
  // false: a skipped step (the shards count it without applying it).
  Status Push(int64_t step, bool finite);
  // Tells every shard this worker has finished.
  Status Done();
  PsClientStats stats() const { return stats_; }

 private:
  struct Shard;
  PsClient(PsClientOptions options, PsAddressLookup lookup);
  Status PushShard(size_t k, int64_t step, bool finite, const std::string& body);
  // One call to shard k, asked again while it is unreachable or busy, until options_.timeout.
  Result<http::Response> Call(size_t k, std::string_view method, const std::string& target,
                              std::string_view body = {});

  PsClientOptions options_;
  PsAddressLookup lookup_;
  std::vector<std::unique_ptr<Shard>> shards_;
  PsClientStats stats_;
};

// The rendezvous store of a job's world (the launcher's, or rank 0's without one), where servers
// publish their addresses under "ps/<shard>". Unavailable when it cannot be reached.
Result<c10::intrusive_ptr<c10d::Store>> ConnectPsStore(const WorldInfo& world,
                                                       std::chrono::milliseconds timeout);
Status PublishPsAddress(c10d::Store& store, int shard, const std::string& address);
PsAddressLookup StoreLookup(const c10::intrusive_ptr<c10d::Store>& store);

}  // namespace reel::parallel
