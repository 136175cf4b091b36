// ddp_bench: Reel's data-parallel training beside PyTorch's DistributedDataParallel, on this
// machine's cores with one thread per rank, for a small R(2+1)D and R(2+1)D-18:
//   - step time (forward, backward with the reducer's all-reduce, SGD) at each world size of
//     --ranks, Reel against Python DDP over gloo with the same model, batch per rank and input
//     (bench/ddp_peer.py);
//   - scaling efficiency from the first world size to each other (time there / time here, same
//     batch per rank: 1 is linear), Reel's and DDP's;
//   - the share of communication hidden behind backward (the reducer's own timing);
//   - the reducer's all-reduce bus bandwidth on R(2+1)D-18's gradients (backward of a trivial
//     loss, so the gradients are ready at once; the time any bucket was in flight, by the
//     reducer's own clock) beside one raw ProcessGroupGloo all-reduce of the same bytes, the
//     limit; goal: >= 0.95 of it.
// Ranks are real processes started by Reel's launcher on loopback, or with --nnodes on several
// nodes, one launcher each (bench/run_ddp_netns_bench.sh: two network namespaces and a veth
// pair; the interface is GLOO_SOCKET_IFNAME's); node 0 prints the figures, without the peer.
//
//   ddp_bench [--ranks 1,2,4] [--batch N] [--frames N] [--size N] [--steps N] [--big-steps N]
//             [--rounds N] [--bw-steps N] [--skip-r2plus1d-18 | --bandwidth-only] [--json FILE]
//             [--nnodes N --node-rank R --master-addr A --master-port P]
// Timed steps: --steps (default 10) for the small model, --big-steps (default 3) for R(2+1)D-18,
// --bw-steps (default 30) pairs for the bandwidth; the small model runs --rounds (default 3)
// alternating rounds.
// Experiments: REEL_BENCH_BUCKET_MB sets Reel's bucket sizes, REEL_BENCH_NO_BUFFERS=1 skips its
// per-step buffer broadcast (PyTorch's side keeps its defaults).
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/allocator.h"
#include "bench/report.h"
#include "models/model_zoo.h"
#include "parallel/comm.h"
#include "parallel/launcher.h"
#include "parallel/reducer.h"
#include "parallel/world.h"
#include "testing/shell.h"

namespace {

using Clock = std::chrono::steady_clock;
using reel::parallel::Comm;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

reel::models::ModelSpec Spec(const std::string& name) {
  reel::models::ModelSpec spec;
  spec.num_classes = 8;
  if (name == "small") {
    spec.name = "r2plus1d";
    spec.width = 16;
    spec.layers = {1, 1, 1, 1};
  } else {
    spec.name = "r2plus1d_18";
  }
  return spec;
}

std::vector<reel::parallel::Reducer::NamedParameter> Named(torch::nn::Module& m) {
  std::vector<reel::parallel::Reducer::NamedParameter> out;
  for (auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

// Worker: step times of one rank. Writes "median hidden_share" to `out` on rank 0.
int StepWorker(const std::string& model_name, int batch, int frames, int size, int steps,
               const std::string& out) {
  torch::set_num_threads(1);
  auto world = reel::parallel::WorldFromEnvironment();
  if (!world.ok()) return 3;
  torch::manual_seed(0);
  auto model = reel::models::BuildModel(Spec(model_name));
  if (!model.ok()) return 3;
  auto module = model->ptr();
  module->train();
  std::unique_ptr<Comm> comm;
  std::unique_ptr<reel::parallel::Reducer> reducer;
  std::vector<torch::Tensor> buffers = module->buffers();
  if (world->distributed()) {
    auto connected = Comm::Connect(*world, {});
    if (!connected.ok()) {
      std::fprintf(stderr, "%s\n", connected.status().ToString().c_str());
      return 5;
    }
    comm = std::move(*connected);
    std::vector<torch::Tensor> state = module->parameters();
    state.insert(state.end(), buffers.begin(), buffers.end());
    if (!comm->Broadcast(state, 0, "initial state").ok()) return 5;
    reel::parallel::ReducerOptions options;
    if (const char* mb = std::getenv("REEL_BENCH_BUCKET_MB")) {  // experiments: bucket size
      options.bucket_cap_bytes = options.first_bucket_bytes =
          static_cast<int64_t>(std::atof(mb) * (1 << 20));
    }
    auto made = reel::parallel::Reducer::Create(Named(*module), *comm, options);
    if (!made.ok()) return 5;
    reducer = std::move(*made);
  }
  torch::optim::SGD sgd(module->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::manual_seed(1 + world->rank);
  torch::Tensor x = torch::randn({batch, 3, frames, size, size});
  torch::Tensor y = torch::randint(0, 8, {batch}, torch::kLong);
  std::vector<double> times, hidden;
  for (int i = 0; i <= steps; ++i) {
    auto start = Clock::now();
    for (auto& p : module->parameters()) p.mutable_grad() = torch::Tensor();
    if (comm && !std::getenv("REEL_BENCH_NO_BUFFERS") &&
        !comm->Broadcast(buffers, 0, "buffers").ok())
      return 5;
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
    if (reducer && !reducer->Finish().ok()) return 5;
    sgd.step();
    if (i > 0) {
      times.push_back(Since(start));
      if (reducer) hidden.push_back(reducer->stats().hidden_share);
    }
  }
  if (world->rank == 0) std::ofstream(out) << Median(times) << " " << Median(hidden) << "\n";
  return 0;
}

// A worker's failure, said on stderr (the launcher's log), as its exit code.
int Fail(const reel::Status& status) {
  std::fprintf(stderr, "ddp_bench worker: %s\n", status.ToString().c_str());
  return 5;
}

// Zeroed tensors of the reducer's bucket sizes, in its launch order.
std::vector<torch::Tensor> BucketTensors(const reel::parallel::Reducer& reducer,
                                         torch::nn::Module& module) {
  std::map<std::string, int64_t> numel;
  for (const auto& p : module.named_parameters()) numel[p.key()] = p.value().numel();
  std::vector<torch::Tensor> out;
  for (const auto& names : reducer.BucketLayout()) {
    int64_t total = 0;
    for (const auto& name : names) total += numel[name];
    out.push_back(torch::zeros({total}));
  }
  return out;
}

// Worker: the reducer's all-reduce against one raw all-reduce of the same bytes (R(2+1)D-18).
int BandwidthWorker(int repeats, const std::string& out) {
  torch::set_num_threads(1);
  auto world = reel::parallel::WorldFromEnvironment();
  if (!world.ok() || !world->distributed()) return 3;
  auto model = reel::models::BuildModel(Spec("r2plus1d_18"));
  if (!model.ok()) return 3;
  auto module = model->ptr();
  auto comm = Comm::Connect(*world, {});
  if (!comm.ok()) return Fail(comm.status());
  auto reducer = reel::parallel::Reducer::Create(Named(*module), **comm);
  if (!reducer.ok()) return Fail(reducer.status());
  int64_t numel = 0;
  for (auto& p : module->parameters()) numel += p.numel();
  torch::Tensor flat = torch::ones({numel});
  std::vector<double> reducer_s, raw_s, ratios;
  // The backward of a sum: every gradient is ready almost at once, and the reducer's own clock
  // (time with a bucket in flight) gives the all-reduces' time without the graph's work.
  auto backward = [&] {
    for (auto& p : module->parameters()) p.mutable_grad() = torch::Tensor();
    torch::Tensor loss = torch::zeros({});
    for (auto& p : module->parameters()) loss = loss + p.sum();
    loss.backward();
  };
  // Both return the seconds, or nothing when a collective failed (said on stderr).
  auto time_reducer = [&]() -> std::optional<double> {
    backward();
    if (const reel::Status s = (*reducer)->Finish(); !s.ok()) {
      Fail(s);
      return std::nullopt;
    }
    return (*reducer)->stats().busy_s;
  };
  // The reducer's buckets as plain tensors, all started at once as the reducer starts them and
  // then waited for, without a backward beside them: what bucketing costs against one
  // all-reduce of everything, apart from sharing the cores with backward.
  std::vector<torch::Tensor> bucket_tensors;
  auto time_buckets = [&]() -> std::optional<double> {
    auto start = Clock::now();
    std::vector<reel::parallel::PendingCollective> pending;
    for (auto& bucket : bucket_tensors) {
      auto started = (*comm)->StartAllReduce(bucket, "raw bucket");
      if (!started.ok()) {
        Fail(started.status());
        return std::nullopt;
      }
      pending.push_back(std::move(*started));
    }
    for (auto& collective : pending) {
      if (const reel::Status s = (*comm)->Wait(collective); !s.ok()) {
        Fail(s);
        return std::nullopt;
      }
    }
    return Since(start);
  };
  auto time_raw = [&]() -> std::optional<double> {
    auto start = Clock::now();
    if (const reel::Status s = (*comm)->AllReduce(flat, "raw all-reduce"); !s.ok()) {
      Fail(s);
      return std::nullopt;
    }
    return Since(start);
  };
  std::vector<double> buckets_s;
  for (int i = 0; i <= repeats; ++i) {
    if (i == 1) bucket_tensors = BucketTensors(**reducer, *module);  // the layout after step 1
    // Each pair is measured back to back, in alternating order, and compared as a pair: this
    // VM's speed drifts over seconds, and a ratio of adjacent measurements cancels most of it.
    std::optional<double> with_reducer, raw;
    if (i % 2 == 0) {
      with_reducer = time_reducer();
      raw = time_raw();
    } else {
      raw = time_raw();
      with_reducer = time_reducer();
    }
    if (!with_reducer || !raw) return 5;
    if (i > 0) {
      const std::optional<double> buckets = time_buckets();
      if (!buckets) return 5;
      buckets_s.push_back(*buckets);
    }
    if (i > 0 && *with_reducer > 0) {
      reducer_s.push_back(*with_reducer);
      raw_s.push_back(*raw);
      ratios.push_back(*raw / *with_reducer);
    }
  }
  if (ratios.empty()) return Fail(reel::InternalError("no pair of timings was usable"));
  std::sort(ratios.begin(), ratios.end());
  if (world->rank == 0) {
    std::ofstream(out) << numel * 4 << " " << Median(reducer_s) << " " << Median(raw_s) << " "
                       << Median(ratios) << " " << ratios[ratios.size() / 4] << " "
                       << ratios[ratios.size() * 3 / 4] << " " << Median(buckets_s) << " "
                       << bucket_tensors.size() << "\n";
  }
  return 0;
}

std::vector<int> ParseRanks(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (std::atoi(item.c_str()) > 0) out.push_back(std::atoi(item.c_str()));
  }
  if (out.empty()) out = {1, 2};
  return out;
}

std::string Self() {
  char self[PATH_MAX] = {0};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return "";
  return self;
}

std::vector<double> ReadNumbers(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> v;
  double d;
  while (in >> d) v.push_back(d);
  return v;
}

// Where the ranks run: this machine alone, or one of several nodes (network namespaces joined
// by a veth pair in bench/run_ddp_netns_bench.sh), each running this program with its rank.
struct Nodes {
  int count = 1;
  int rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
};
Nodes nodes;

// Runs this program as `world` ranks under Reel's launcher, spread evenly over the nodes;
// returns rank 0's numbers (on the other nodes, none).
std::vector<double> Launch(int world, std::vector<std::string> worker_args) {
  char path[] = "/tmp/reel-ddp-bench-XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  reel::parallel::LaunchOptions o;
  o.nproc = world / nodes.count;
  o.nnodes = nodes.count;
  o.node_rank = nodes.rank;
  o.master_addr = nodes.master_addr;
  // Each launch on its own port: a node that finishes one launch early must not join the
  // previous launch's store, still closing on node 0.
  static int launches = 0;
  o.master_port = nodes.count > 1 ? nodes.master_port + launches++ : 0;
  o.worker_argv = {Self(), "--worker"};
  o.worker_argv.insert(o.worker_argv.end(), worker_args.begin(), worker_args.end());
  o.worker_argv.push_back(path);
  auto result = reel::parallel::RunLauncher(o);
  std::vector<double> numbers;
  if (result.ok() && result->exit_code == 0)
    numbers = ReadNumbers(path);
  else
    std::fprintf(stderr, "workers failed: %s\n",
                 result.ok() ? result->failure.c_str() : result.status().ToString().c_str());
  unlink(path);
  return numbers;
}

// PyTorch DDP as the peer, which runs on this machine's loopback only.
std::optional<reel::bench::Reference> PeerReference(double value) {
  if (nodes.count > 1) return std::nullopt;
  return reel::bench::Reference{value, "PyTorch DDP"};
}

std::string OverNodes() {
  return nodes.count > 1 ? " over " + std::to_string(nodes.count) + " nodes" : "";
}

double Peer(const std::string& model, int world, int batch, int frames, int size, int steps) {
  const char* source = std::getenv("REEL_SOURCE_DIR");
  std::string peer = std::string(source ? source : ".") + "/bench/ddp_peer.py";
  std::string args = (model == "small" ? "r2plus1d_small" : "r2plus1d_18") + std::string(" ") +
                     std::to_string(world) + " " + std::to_string(batch) + " " +
                     std::to_string(frames) + " " + std::to_string(size) + " " +
                     std::to_string(steps) + (model == "small" ? " 16 1 1 1 1" : "");
  auto run = reel::testing::RunCommand("/usr/bin/python3 '" + peer + "' " + args + " 2>/dev/null");
  return run.exit_code == 0 ? std::atof(run.output.c_str()) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  reel::RetainFreedHeapMemory();  // the heap settings of `reel`, which these steps stand for
  if (argc > 1 && std::string(argv[1]) == "--worker") {
    std::string mode = argc > 2 ? argv[2] : "";
    if (mode == "step" && argc == 9) {
      return StepWorker(argv[3], std::atoi(argv[4]), std::atoi(argv[5]), std::atoi(argv[6]),
                        std::atoi(argv[7]), argv[8]);
    }
    if (mode == "bandwidth" && argc == 5) return BandwidthWorker(std::atoi(argv[3]), argv[4]);
    return 2;
  }
  const std::string json = reel::bench::TakeJsonFlag(&argc, argv);
  int batch = 4, frames = 8, size = 112, steps = 10, big_steps = 3, rounds = 3, bw_steps = 30;
  bool big = true, steps_models = true;
  std::vector<int> ranks = {1, 2, 4};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--skip-r2plus1d-18" || a == "--bandwidth-only") {
      big = false;
      steps_models = a != "--bandwidth-only";
      continue;
    }
    if (i + 1 >= argc) break;
    if (a == "--ranks") {
      ranks = ParseRanks(argv[++i]);
      continue;
    }
    if (a == "--master-addr") {
      nodes.master_addr = argv[++i];
      continue;
    }
    int v = std::atoi(argv[++i]);
    if (a == "--batch")
      batch = v;
    else if (a == "--frames")
      frames = v;
    else if (a == "--size")
      size = v;
    else if (a == "--steps")
      steps = v;
    else if (a == "--big-steps")
      big_steps = v;
    else if (a == "--rounds")
      rounds = std::max(1, v);
    else if (a == "--bw-steps")
      bw_steps = std::max(4, v);
    else if (a == "--nnodes")
      nodes.count = std::max(1, v);
    else if (a == "--node-rank")
      nodes.rank = v;
    else if (a == "--master-port")
      nodes.master_port = v;
  }
  for (int n : ranks) {
    if (n % nodes.count != 0 || (nodes.count > 1 && nodes.master_port <= 0)) {
      std::fprintf(stderr,
                   "ddp_bench: with --nnodes %d every size in --ranks must be a multiple of it, "
                   "and --master-port must be set\n",
                   nodes.count);
      return 2;
    }
  }
  std::printf(
      "ddp_bench: batch %d x 3 x %d x %d^2 per rank, median of %d timed steps in %d alternating "
      "rounds (R(2+1)D-18: %d steps, 1 round), 1 thread per rank, gloo %s\n",
      batch, frames, size, steps, rounds, big_steps,
      nodes.count == 1 ? "on loopback"
                       : ("over " + std::to_string(nodes.count) + " nodes").c_str());
  reel::bench::Report report("ddp_bench", 1);
  bool failed = false;  // a run that failed is said and skipped; the others still report
  std::vector<std::string> models;
  if (steps_models) models.push_back("small");
  if (big) models.push_back("r2plus1d_18");
  for (const std::string& m : models) {
    const int timed = m == "small" ? steps : big_steps;
    const std::vector<std::string> args = {"step",
                                           m,
                                           std::to_string(batch),
                                           std::to_string(frames),
                                           std::to_string(size),
                                           std::to_string(timed)};
    // Rounds alternate Reel and PyTorch, so that drift in this machine's speed (a shared VM)
    // falls on both; each figure is the median over rounds of per-round medians.
    std::map<int, std::vector<double>> reel_s, peer_s, hidden;
    for (int round = 0; round < (m == "small" ? rounds : 1); ++round) {
      for (int n : ranks) {
        const std::vector<double> reel = Launch(n, args);
        if (nodes.rank != 0) continue;  // node 0 reports
        // PyTorch's DDP peer runs on loopback only: across nodes the figures stand alone.
        const double peer = nodes.count == 1 ? Peer(m, n, batch, frames, size, timed) : 1;
        if (reel.size() < 2 || peer <= 0) {
          std::printf("%s at %d ranks: a run failed (Reel %s, PyTorch %s)\n", m.c_str(), n,
                      reel.size() < 2 ? "failed" : "ran", peer <= 0 ? "failed" : "ran");
          failed = true;
          continue;
        }
        reel_s[n].push_back(reel[0]);
        hidden[n].push_back(reel[1]);
        peer_s[n].push_back(peer);
      }
    }
    const std::string label = m == "small" ? "R(2+1)D small" : "R(2+1)D-18";
    const double reel_one = Median(reel_s[ranks.front()]);
    const double peer_one = Median(peer_s[ranks.front()]);
    for (int n : ranks) {
      if (reel_s[n].empty() || reel_s[ranks.front()].empty()) continue;
      const std::string at =
          label + ", " + std::to_string(n) + " rank" + (n > 1 ? "s" : "") + OverNodes();
      const double reel = Median(reel_s[n]), peer = Median(peer_s[n]);
      report.Add({at + ": step", reel, "s", {}, PeerReference(peer)});
      if (n == ranks.front()) continue;
      // Weak scaling (the same batch per rank): time at the first size / time at n, where 1 is
      // perfect; past the machine's cores the ranks share them and it must fall.
      report.Add({at + ": scaling efficiency", reel_one / reel, "x",
                  reel::bench::Reference{1.0, "linear"}, PeerReference(peer_one / peer)});
      report.Add(
          {at + ": communication hidden behind backward", Median(hidden[n]), "share", {}, {}});
    }
  }
  for (int n : ranks) {
    if (n < 2) continue;
    std::vector<double> bw = Launch(n, {"bandwidth", std::to_string(bw_steps)});
    if (nodes.rank != 0) continue;
    if (bw.size() < 8) {
      std::printf("bandwidth run at %d ranks failed\n", n);
      failed = true;
      continue;
    }
    // Bus bandwidth as NCCL's tests define it: bytes x 2 (n - 1) / n per second.
    auto busbw = [&](double seconds) { return bw[0] * 2.0 * (n - 1) / n / seconds / 1e9; };
    const std::string at = "all-reduce of R(2+1)D-18's gradients (" +
                           std::to_string(static_cast<int>(bw[0] / 1e6)) + " MB), " +
                           std::to_string(n) + " ranks" + OverNodes();
    report.Add({at + ": reducer bus bandwidth",
                busbw(bw[1]),
                "GB/s",
                reel::bench::Reference{busbw(bw[2]), "raw ProcessGroupGloo all-reduce"},
                {}});
    report.Add({at + ": the reducer's " + std::to_string(static_cast<int>(bw[7])) +
                    " buckets, raw, started at once",
                busbw(bw[6]),
                "GB/s",
                reel::bench::Reference{busbw(bw[2]), "raw ProcessGroupGloo all-reduce"},
                {}});
    std::printf(
        "%d ranks: reducer/raw ratio %.2f, median of %d back-to-back pairs (quartiles "
        "%.2f-%.2f)\n",
        n, bw[3], bw_steps, bw[4], bw[5]);
  }
  if (nodes.rank != 0) return 0;  // node 0 prints the figures
  const int written = report.Finish(json);
  return failed ? 1 : written;
}
