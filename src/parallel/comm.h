// A process group for one rank of a data-parallel job: rendezvous on c10d's TCPStore, a
// connectivity check, then Gloo collectives (NCCL for CUDA tensors when Reel is built against a
// LibTorch with CUDA), with a watchdog that turns a silent peer into an error naming it.
//
// Rendezvous: rank 0 hosts the TCPStore at MASTER_ADDR:MASTER_PORT, or (WorldInfo::agent_store)
// the launcher does and every rank is a client. Keys live under "reel/gen<generation>/" so a
// restarted job never reads a previous attempt's keys.
// Connectivity check: every rank listens on the address its collectives bind to (the named
// interface's, 127.0.0.1 on a single node, else the hostname's), publishes it, and connects to
// every other rank's; a failure names the rank and address.
// Watchdog: every rank publishes a heartbeat (a counter and the collectives it issued) to the
// store once per heartbeat interval from its own thread. A collective that fails or exceeds
// `timeout` is reported by reading the heartbeats: ranks whose counter stopped are "not
// answering"; ranks that issued fewer collectives are "behind", with the collective they last
// issued. The report is logged and returned as the error.
//
// Shutdown: destroying a Comm counts its rank out of the rendezvous; a rank 0 that hosts the
// store waits until every other rank has done so or stopped sending heartbeats (at most
// `timeout`), so that none loses the store while it still reads rank 0's last keys.
//
// Errors: Connect: InvalidArgument (options, a backend not built in), Unavailable (rendezvous
// not reached, a rank missing, a peer unreachable). Collectives: Unavailable with the watchdog's
// report (a peer died, hung or timed out), InvalidArgument (a dtype the backend cannot reduce).
// Thread-safety: StartAllReduce and Wait may be called from different threads (the reducer
// starts all-reduces from autograd hooks); collectives must be issued in the same order on
// every rank.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "parallel/world.h"

namespace reel::parallel {

// LibTorch 2 split process groups into a dispatcher and per-device backends; Gloo and NCCL are
// backends there and process groups in 1.x. Both expose the same collectives.
#if TORCH_VERSION_MAJOR >= 2
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

struct CommOptions {
  std::chrono::milliseconds timeout{60000};           // a collective slower than this fails
  std::chrono::milliseconds connect_timeout{300000};  // for every rank to join the rendezvous
  std::chrono::milliseconds heartbeat_interval{1000};
  std::string interface_name;  // "" = GLOO_SOCKET_IFNAME, else see the rule above
  bool cuda = false;           // tensors live on CUDA: NCCL
};

// One all-reduce (or send, or receive) in flight.
struct PendingCollective {
  c10::intrusive_ptr<c10d::Work> work;
  int64_t seq = 0;  // 0 for a send or receive
  std::string what;
};

class Comm {
 public:
  static Result<std::unique_ptr<Comm>> Connect(const WorldInfo& world, const CommOptions& options);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // A group of some of the world's ranks (every member calls it with the same `ranks` and
  // `name`; others do not): its own process group over the same store and addresses, in which
  // this rank is its index in `ranks`. For meshes of data and pipeline parallelism. It must be
  // destroyed before this Comm.
  Result<std::unique_ptr<Comm>> Split(const std::vector<int>& ranks, const std::string& name);

  int rank() const { return world_.rank; }
  int world_size() const { return world_.world_size; }
  const WorldInfo& world() const { return world_; }
  std::string backend() const { return backend_; }

  // Starts a sum all-reduce of `tensor` in place; `what` names it in watchdog reports.
  Result<PendingCollective> StartAllReduce(at::Tensor tensor, std::string what);
  // Waits for it (the watchdog's timeout applies inside the backend).
  Status Wait(PendingCollective& pending);
  Status AllReduce(at::Tensor tensor, std::string what);
  // Copies root's tensors to every rank (one flat buffer per dtype and device).
  Status Broadcast(const std::vector<at::Tensor>& tensors, int root, const std::string& what);
  // Replaces each tensor with its mean over the ranks (one flat buffer per dtype and device).
  Status AllReduceMean(const std::vector<at::Tensor>& tensors, const std::string& what);
  // The all-reduce bus bandwidth in bytes/s: 2 (n-1)/n of `bytes` cross each rank's link in a
  // ring, over the best of `repeats` all-reduces after a warm-up. Every rank must call it.
  Result<double> MeasureAllReduceBandwidth(int64_t bytes = 4 << 20, int repeats = 3);
  // Point to point, for pipeline stages: sends `tensor` to rank `dst`, or receives into `tensor`
  // (the sender's shape and dtype) from rank `src`; a send pairs with the receive of the same
  // tag. Ranks issue different numbers of these, so they are not counted with the collectives;
  // a failure names the peer. The tensor must live until Wait returns.
  Result<PendingCollective> StartSend(at::Tensor tensor, int dst, int tag, const std::string& what);
  Result<PendingCollective> StartRecv(at::Tensor tensor, int src, int tag, const std::string& what);
  // Every rank waits here; `timeout` (0 = the watchdog's) for phases where rank 0 works alone
  // (evaluation, checkpoints) while the others wait.
  Status Barrier(const std::string& what,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // Rank 0 works alone (a checkpoint, an evaluation) while the others wait here for it, up to
  // `patience`, which may exceed the watchdog's timeout; a rank 0 that stops sending heartbeats
  // fails the wait within three heartbeat intervals. Goes through the store, not the backend.
  Status FollowLeader(const std::string& what, std::chrono::milliseconds patience);

  // The watchdog's report on why a collective failed (reads every rank's heartbeat; takes about
  // three heartbeat intervals).
  std::string DiagnoseFailure(int64_t seq, const std::string& what, const std::string& error);

 private:
  Comm(WorldInfo world, CommOptions options);
  Status Rendezvous();
  Status MakeGroup();  // the backend's process group on store_
  Status Flattened(const std::vector<at::Tensor>& tensors, const std::string& what, bool copy_back,
                   const std::function<void(std::vector<at::Tensor>&)>& collective);
  bool HostsStore() const;
  // Run on destruction: counts this rank out; the store's host waits for the others.
  void LeaveRendezvous();
  void HeartbeatLoop();
  int64_t Issue(const std::string& what);
  Status Failed(int64_t seq, const std::string& what, const std::exception& e);
  Result<PendingCollective> StartPointToPoint(bool send, at::Tensor tensor, int peer, int tag,
                                              const std::string& what);

  WorldInfo world_;
  CommOptions options_;
  std::string backend_;
  std::string bind_address_;
  c10::intrusive_ptr<c10d::Store> store_;            // prefixed by generation
  c10::intrusive_ptr<c10d::Store> heartbeat_store_;  // its own connection
  c10::intrusive_ptr<CollectiveGroup> group_;
  std::atomic<int64_t> issued_{0};
  std::mutex last_mutex_;
  std::string last_what_;
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
};

}  // namespace reel::parallel
