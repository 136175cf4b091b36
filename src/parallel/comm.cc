// c10d's headers declare ProcessGroupGloo only under USE_C10D_GLOO, which LibTorch's own build
// defines; every LibTorch Reel supports has Gloo.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include "parallel/comm.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <functional>
#ifdef REEL_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>

#include "base/logging.h"
#include "base/sync_point.h"
#include "parallel/net.h"
#include "parallel/store_wait.h"

namespace reel::parallel {
namespace {

// A c10d exception's message without the C++ stack LibTorch appends to it.
std::string WithoutTrace(std::string error) {
  const size_t frames = error.find("\nException raised from");
  if (frames != std::string::npos) error.resize(frames);
  return error;
}

using Clock = std::chrono::steady_clock;

std::string Join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

std::vector<uint8_t> Bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}
std::string Text(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

c10::intrusive_ptr<c10d::Store> ConnectStore(const WorldInfo& w, bool server,
                                             std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(w.master_port);
  o.isServer = server;
  o.waitWorkers = false;
  o.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(w.master_addr, o);
}

// The heartbeat value: "<beats> <collectives issued> <what was issued last>".
struct Heartbeat {
  int64_t beats = -1;
  int64_t issued = 0;
  std::string last;
};

Heartbeat ParseHeartbeat(const std::string& text) {
  Heartbeat h;
  std::istringstream in(text);
  in >> h.beats >> h.issued;
  std::getline(in, h.last);
  if (!h.last.empty() && h.last[0] == ' ') h.last.erase(0, 1);
  return h;
}

}  // namespace

Comm::Comm(WorldInfo world, CommOptions options)
    : world_(std::move(world)), options_(std::move(options)) {}

Comm::~Comm() {
  LeaveRendezvous();
  stop_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
  group_.reset();
}

Result<std::unique_ptr<Comm>> Comm::Connect(const WorldInfo& world, const CommOptions& options) {
  if (options.timeout.count() <= 0 || options.connect_timeout.count() <= 0 ||
      options.heartbeat_interval.count() <= 0) {
    return InvalidArgumentError("dist: timeouts and the heartbeat interval must be positive");
  }
  std::unique_ptr<Comm> comm(new Comm(world, options));
  if (comm->options_.interface_name.empty()) {
    const char* env = std::getenv("GLOO_SOCKET_IFNAME");
    if (env != nullptr) comm->options_.interface_name = env;
  }
  try {
    REEL_RETURN_IF_ERROR(comm->Rendezvous());
  } catch (const std::exception& e) {
    return UnavailableError("rank " + std::to_string(world.rank) + ": rendezvous at " +
                            world.master_addr + ":" + std::to_string(world.master_port) +
                            " failed: " + e.what());
  }
  return comm;
}

bool Comm::HostsStore() const { return !world_.agent_store && world_.rank == 0; }

// The rank that hosts the store (rank 0 without Reel's launcher, as under torchrun's variables
// set by hand) stays until every other rank has left or fallen silent: its exit takes the store
// with it, and a rank still polling for rank 0's last "done" key would find no store.
void Comm::LeaveRendezvous() {
  if (!store_) return;
  try {
    store_->add("left", 1);
    if (!HostsStore()) return;
    const auto deadline = Clock::now() + options_.timeout;
    std::map<int, int64_t> beats;
    auto last_change = Clock::now();
    REEL_SYNC_POINT("Comm::LeaveRendezvous:HostWaits");
    while (store_->add("left", 0) < world_.world_size && Clock::now() < deadline) {
      bool changed = false;
      for (int r = 1; r < world_.world_size; ++r) {
        const std::string key = "heartbeat/" + std::to_string(r);
        if (!store_->check({key})) continue;
        const int64_t beat = ParseHeartbeat(Text(store_->get(key))).beats;
        auto known = beats.find(r);
        if (known == beats.end() || known->second != beat) changed = true;
        beats[r] = beat;
      }
      if (changed) last_change = Clock::now();
      if (Clock::now() - last_change > options_.heartbeat_interval * 3)
        break;  // the rest died or hang
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    Logger("parallel")->debug("rank {}: leaving the rendezvous: {}", world_.rank, e.what());
  }
}

Status Comm::Rendezvous() {
  const std::string where = world_.master_addr + ":" + std::to_string(world_.master_port);
  if (!options_.interface_name.empty()) {
    REEL_ASSIGN_OR_RETURN(bind_address_, InterfaceAddress(options_.interface_name));
  } else {
    bind_address_ = world_.nnodes == 1 ? "127.0.0.1" : DefaultHostAddress();
  }
  c10::intrusive_ptr<c10d::Store> base;
  try {
    base = ConnectStore(world_, HostsStore(), options_.connect_timeout);
  } catch (const std::exception& e) {
    return UnavailableError(
        "rank " + std::to_string(world_.rank) + " cannot reach the rendezvous store at " + where +
        " (MASTER_ADDR/MASTER_PORT) within " +
        std::to_string(options_.connect_timeout.count() / 1000) + " s: " + e.what());
  }
  const std::string prefix = "reel/gen" + std::to_string(world_.generation);
  store_ = c10::make_intrusive<c10d::PrefixStore>(prefix, base);
  store_->setTimeout(options_.connect_timeout);

  // Connectivity check.
  REEL_ASSIGN_OR_RETURN(auto listener, ProbeListener::Listen(bind_address_));
  const std::string mine = bind_address_ + ":" + std::to_string(listener->port());
  store_->set("probe/" + std::to_string(world_.rank), Bytes(mine));
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(world_.world_size));
  for (int r = 0; r < world_.world_size; ++r) keys.push_back("probe/" + std::to_string(r));
  if (!WaitForKeys(*store_, keys, options_.connect_timeout)) {
    std::vector<int> missing;
    for (int r = 0; r < world_.world_size; ++r) {
      if (!store_->check({keys[r]})) missing.push_back(r);
    }
    return UnavailableError("ranks " + Join(missing) + " did not join the rendezvous at " + where +
                            " within " + std::to_string(options_.connect_timeout.count() / 1000) +
                            " s");
  }
  const auto probe_timeout = std::min(options_.connect_timeout, std::chrono::milliseconds(10000));
  for (int r = 0; r < world_.world_size; ++r) {
    if (r == world_.rank) continue;
    std::string peer = Text(store_->get(keys[r]));
    size_t colon = peer.rfind(':');
    Status reached =
        ProbeConnect(peer.substr(0, colon), std::atoi(peer.c_str() + colon + 1), probe_timeout);
    if (!reached.ok()) {
      return UnavailableError(
          "rank " + std::to_string(world_.rank) + " (" + bind_address_ + ") cannot reach rank " +
          std::to_string(r) + " at " + reached.message() +
          "; check the network and firewall between the nodes, or name the interface "
          "(--iface / GLOO_SOCKET_IFNAME)");
    }
  }
  // Keep listening until every rank has checked every other.
  store_->add("probe-done", 1);
  const auto deadline = Clock::now() + options_.connect_timeout;
  while (store_->add("probe-done", 0) < world_.world_size) {
    if (Clock::now() > deadline)
      return UnavailableError("the connectivity check did not finish on every rank");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  REEL_RETURN_IF_ERROR(MakeGroup());
  heartbeat_store_ = c10::make_intrusive<c10d::PrefixStore>(
      prefix, ConnectStore(world_, false, options_.connect_timeout));
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  Logger("parallel")
      ->info("rank {} of {} joined ({}, {} at {})", world_.rank, world_.world_size, backend_,
             world_.source, mine);
  return Status::Ok();
}

Status Comm::MakeGroup() {
  if (options_.cuda) {
#ifdef REEL_WITH_NCCL
    auto nccl = c10d::ProcessGroupNCCL::Options::create();
    nccl->timeout = options_.timeout;
    group_ =
        c10::make_intrusive<c10d::ProcessGroupNCCL>(store_, world_.rank, world_.world_size, nccl);
    backend_ = "nccl";
#else
    return InvalidArgumentError(
        "training on CUDA across processes needs NCCL, and this Reel was built against a "
        "LibTorch without it");
#endif
  } else {
    auto gloo = c10d::ProcessGroupGloo::Options::create(options_.timeout);
    gloo->devices.push_back(
        options_.interface_name.empty()
            ? c10d::ProcessGroupGloo::createDeviceForHostname(bind_address_)
            : c10d::ProcessGroupGloo::createDeviceForInterface(options_.interface_name));
    gloo->threads = 2;
    group_ =
        c10::make_intrusive<c10d::ProcessGroupGloo>(store_, world_.rank, world_.world_size, gloo);
    backend_ = "gloo";
  }
  store_->setTimeout(options_.timeout);
  return Status::Ok();
}

Result<std::unique_ptr<Comm>> Comm::Split(const std::vector<int>& ranks, const std::string& name) {
  const auto me = std::find(ranks.begin(), ranks.end(), world_.rank);
  if (me == ranks.end() || name.empty() || name.find('/') != std::string::npos) {
    return InvalidArgumentError("rank " + std::to_string(world_.rank) + " cannot join group '" +
                                name + "' of ranks " + Join(ranks));
  }
  for (int r : ranks) {
    if (r < 0 || r >= world_.world_size || std::count(ranks.begin(), ranks.end(), r) != 1) {
      return InvalidArgumentError("group '" + name + "' names rank " + std::to_string(r) +
                                  " wrongly (world of " + std::to_string(world_.world_size) + ")");
    }
  }
  WorldInfo sub = world_;
  sub.rank = static_cast<int>(me - ranks.begin());
  sub.world_size = static_cast<int>(ranks.size());
  sub.agent_store = true;  // the world's store host stays the host; the group only uses it
  std::unique_ptr<Comm> comm(new Comm(sub, options_));
  comm->bind_address_ = bind_address_;
  try {
    comm->store_ = c10::make_intrusive<c10d::PrefixStore>("group/" + name, store_);
    REEL_RETURN_IF_ERROR(comm->MakeGroup());
    comm->heartbeat_store_ =
        c10::make_intrusive<c10d::PrefixStore>("group/" + name, heartbeat_store_);
  } catch (const std::exception& e) {
    return UnavailableError("rank " + std::to_string(world_.rank) + ": group '" + name +
                            "' failed: " + WithoutTrace(e.what()));
  }
  Comm* raw = comm.get();
  comm->heartbeat_ = std::thread([raw] { raw->HeartbeatLoop(); });
  return comm;
}

void Comm::HeartbeatLoop() {
  int64_t beats = 0;
  const std::string key = "heartbeat/" + std::to_string(world_.rank);
  while (!stop_) {
    std::string last;
    {
      std::lock_guard<std::mutex> lock(last_mutex_);
      last = last_what_;
    }
    try {
      heartbeat_store_->set(
          key, Bytes(std::to_string(++beats) + " " + std::to_string(issued_.load()) + " " + last));
    } catch (const std::exception&) {
      // The store's host is gone; the collective that fails next reports it.
    }
    for (auto slept = std::chrono::milliseconds(0); slept < options_.heartbeat_interval && !stop_;
         slept += std::chrono::milliseconds(50)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

int64_t Comm::Issue(const std::string& what) {
  std::lock_guard<std::mutex> lock(last_mutex_);
  last_what_ = what;
  return ++issued_;
}

std::string Comm::DiagnoseFailure(int64_t seq, const std::string& what, const std::string& error) {
  std::ostringstream report;
  report << "rank " << world_.rank << ": collective #" << seq << " (" << what
         << ") failed: " << error;
  auto read_all = [&](std::map<int, Heartbeat>* out) {
    for (int r = 0; r < world_.world_size; ++r) {
      const std::string key = "heartbeat/" + std::to_string(r);
      if (store_->check({key})) (*out)[r] = ParseHeartbeat(Text(store_->get(key)));
    }
  };
  std::map<int, Heartbeat> before, after;
  try {
    read_all(&before);
    std::this_thread::sleep_for(options_.heartbeat_interval * 3);
    read_all(&after);
  } catch (const std::exception& e) {
    report << ". The rendezvous store at " << world_.master_addr << ":" << world_.master_port
           << " is unreachable too (" << (world_.agent_store ? "the launcher" : "rank 0")
           << " hosts it; it has "
           << "probably exited)";
    return report.str();
  }
  std::vector<std::string> findings;
  for (int r = 0; r < world_.world_size; ++r) {
    if (r == world_.rank) continue;
    auto b = before.find(r), a = after.find(r);
    if (a == after.end()) {
      findings.push_back("rank " + std::to_string(r) + " never sent a heartbeat");
    } else if (b != before.end() && b->second.beats == a->second.beats) {
      char silent[32];
      std::snprintf(silent, sizeof(silent), "%.1f",
                    options_.heartbeat_interval.count() * 3 / 1000.0);
      std::string finding = "rank " + std::to_string(r) + " is not answering: no heartbeat for " +
                            silent + " s (it died, hangs or is stopped)";
      if (a->second.issued > 0) {
        finding += "; its last heartbeat had it at collective #" +
                   std::to_string(a->second.issued) + " (" + a->second.last + ")";
      }
      findings.push_back(finding);
    } else if (a->second.issued < seq) {
      findings.push_back("rank " + std::to_string(r) +
                         " is alive but behind: it issued only collective #" +
                         std::to_string(a->second.issued) + " (" + a->second.last + ")");
    }
  }
  if (findings.empty()) {
    report << ". Every other rank still answers and has reached this collective";
  } else {
    report << ". ";
    for (size_t i = 0; i < findings.size(); ++i) report << (i ? "; " : "") << findings[i];
  }
  return report.str();
}

Status Comm::Failed(int64_t seq, const std::string& what, const std::exception& e) {
  const std::string error = WithoutTrace(e.what());
  std::string report = DiagnoseFailure(seq, what, error);
  Logger("parallel")->error("{}", report);
  if (error.find("Invalid scalar type") != std::string::npos) return InvalidArgumentError(report);
  return UnavailableError(report);
}

Result<PendingCollective> Comm::StartAllReduce(at::Tensor tensor, std::string what) {
  PendingCollective p;
  p.seq = Issue(what);
  p.what = std::move(what);
  try {
    std::vector<at::Tensor> tensors{std::move(tensor)};
    p.work = group_->allreduce(tensors);
  } catch (const std::exception& e) {
    return Failed(p.seq, p.what, e);
  }
  return p;
}

Result<PendingCollective> Comm::StartSend(at::Tensor tensor, int dst, int tag,
                                          const std::string& what) {
  return StartPointToPoint(true, std::move(tensor), dst, tag, what);
}

Result<PendingCollective> Comm::StartRecv(at::Tensor tensor, int src, int tag,
                                          const std::string& what) {
  return StartPointToPoint(false, std::move(tensor), src, tag, what);
}

Result<PendingCollective> Comm::StartPointToPoint(bool send, at::Tensor tensor, int peer, int tag,
                                                  const std::string& what) {
  if (peer < 0 || peer >= world_.world_size || peer == world_.rank) {
    return InvalidArgumentError("rank " + std::to_string(world_.rank) + " cannot " +
                                (send ? "send to" : "receive from") + " rank " +
                                std::to_string(peer));
  }
  PendingCollective p;
  p.what = what + (send ? " to rank " : " from rank ") + std::to_string(peer);
  try {
    std::vector<at::Tensor> tensors{std::move(tensor)};
    p.work = send ? group_->send(tensors, peer, tag) : group_->recv(tensors, peer, tag);
  } catch (const std::exception& e) {
    return UnavailableError("rank " + std::to_string(world_.rank) + ": " + p.what +
                            " failed: " + WithoutTrace(e.what()));
  }
  return p;
}

Status Comm::Wait(PendingCollective& pending) {
  try {
    pending.work->wait();
  } catch (const std::exception& e) {
    if (pending.seq == 0) {  // a send or receive: its peer is named, no collective to diagnose
      return UnavailableError("rank " + std::to_string(world_.rank) + ": " + pending.what +
                              " failed: " + WithoutTrace(e.what()));
    }
    return Failed(pending.seq, pending.what, e);
  }
  return Status::Ok();
}

Status Comm::AllReduce(at::Tensor tensor, std::string what) {
  REEL_ASSIGN_OR_RETURN(PendingCollective p, StartAllReduce(std::move(tensor), std::move(what)));
  return Wait(p);
}

Result<double> Comm::MeasureAllReduceBandwidth(int64_t bytes, int repeats) {
  at::Tensor t = at::ones({std::max<int64_t>(1, bytes / 4)}, at::kFloat);
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r <= repeats; ++r) {  // run 0 warms up
    const auto start = std::chrono::steady_clock::now();
    REEL_RETURN_IF_ERROR(AllReduce(t, "measuring the all-reduce bandwidth"));
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) best = std::min(best, took);
  }
  const double n = world_size();
  return 2 * (n - 1) / n * static_cast<double>(t.numel() * 4) / std::max(best, 1e-9);
}

// One flat buffer per (dtype, device): one collective instead of one per tensor. `collective`
// runs on each buffer; its result is copied back into the tensors unless `copy_back` is false.
Status Comm::Flattened(const std::vector<at::Tensor>& tensors, const std::string& what,
                       bool copy_back,
                       const std::function<void(std::vector<at::Tensor>&)>& collective) {
  std::map<std::pair<int, std::string>, std::vector<at::Tensor>> groups;
  for (const auto& t : tensors)
    groups[{static_cast<int>(t.scalar_type()), t.device().str()}].push_back(t);
  for (auto& [key, group] : groups) {
    std::vector<at::Tensor> flat_parts;
    for (const auto& t : group) flat_parts.push_back(t.detach().reshape(-1));
    std::vector<at::Tensor> one{at::cat(flat_parts)};
    const int64_t seq = Issue(what);
    try {
      collective(one);
    } catch (const std::exception& e) {
      return Failed(seq, what, e);
    }
    if (!copy_back) continue;
    int64_t offset = 0;
    at::NoGradGuard no_grad;
    for (auto& t : group) {
      t.detach().copy_(one[0].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
  return Status::Ok();
}

Status Comm::Broadcast(const std::vector<at::Tensor>& tensors, int root, const std::string& what) {
  return Flattened(tensors, what, world_.rank != root, [&](std::vector<at::Tensor>& flat) {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    group_->broadcast(flat, options)->wait();
  });
}

Status Comm::AllReduceMean(const std::vector<at::Tensor>& tensors, const std::string& what) {
  return Flattened(tensors, what, true, [&](std::vector<at::Tensor>& flat) {
    group_->allreduce(flat)->wait();
    flat[0].div_(world_.world_size);
  });
}

Status Comm::FollowLeader(const std::string& what, std::chrono::milliseconds patience) {
  const int64_t seq = Issue(what);
  const std::string key = "leader-done/" + std::to_string(seq);
  try {
    if (world_.rank == 0) {
      store_->set(key, Bytes("1"));
      return Status::Ok();
    }
    // Wait in slices, checking that rank 0 still sends heartbeats: a dead or stopped rank 0 is
    // reported within a few heartbeats, a busy one is waited for up to `patience`.
    const auto deadline = Clock::now() + patience;
    const std::string leader = "heartbeat/0";
    int64_t last_beat = -1;
    auto last_change = Clock::now();
    while (true) {
      if (WaitForKeys(*store_, {key}, options_.heartbeat_interval)) return Status::Ok();
      const int64_t beat =
          store_->check({leader}) ? ParseHeartbeat(Text(store_->get(leader))).beats : -1;
      if (beat != last_beat) {
        last_beat = beat;
        last_change = Clock::now();
        REEL_SYNC_POINT("Comm::FollowLeader:RankZeroAlive");
      }
      const bool silent = Clock::now() - last_change > options_.heartbeat_interval * 3;
      if (silent || Clock::now() > deadline) {
        std::runtime_error e(silent
                                 ? "rank 0 stopped sending heartbeats while this rank waited for it"
                                 : "rank 0 did not finish within " +
                                       std::to_string(patience.count() / 1000) + " s");
        return Failed(seq, what, e);
      }
    }
  } catch (const std::exception& e) {
    return Failed(seq, what, e);
  }
}

Status Comm::Barrier(const std::string& what, std::chrono::milliseconds timeout) {
  const int64_t seq = Issue(what);
  try {
    c10d::BarrierOptions options;
    if (timeout.count() > 0) options.timeout = timeout;
    group_->barrier(options)->wait();
  } catch (const std::exception& e) {
    return Failed(seq, what, e);
  }
  return Status::Ok();
}

}  // namespace reel::parallel
