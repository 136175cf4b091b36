// registry_bench's throughput figures: hash and split, push and pull, beside their peers.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "base/hash.h"
#include "base/status.h"
#include "bench/registry_bench_storage.h"
#include "bench/registry_bench_util.h"
#include "models/safetensors.h"
#include "registry/registry.h"
#include "registry/weight_store.h"
#include "storage/local_store.h"
#include "storage/memory_store.h"
#include "testing/shell.h"

namespace reel::registry_bench {

// ---------------------------------------------------------------------------------------------
// Throughput.

namespace {

// MB/s of cutting every tensor into WeightStore's chunks and hashing each with SHA-256.
double HashSplitMBps(const SafetensorsFile& weights, int repeat) {
  const uint64_t chunk_bytes = reel::registry::WeightStoreOptions{}.chunk_bytes;
  std::vector<double> times;
  uint64_t total = 0;
  for (int i = 0; i < repeat; ++i) {
    total = 0;
    std::vector<std::string> addresses;
    const Clock::time_point start = Clock::now();
    for (const auto& [name, t] : weights.tensors) {
      const uint64_t width = std::max<size_t>(1, reel::models::DtypeSize(t.dtype));
      const uint64_t per_chunk = chunk_bytes / width * width;
      const std::string_view data = t.data;
      for (uint64_t offset = 0; offset < data.size(); offset += per_chunk) {
        const std::string_view chunk = data.substr(offset, per_chunk);
        addresses.push_back(reel::Sha256Hex(chunk));  // kept, as a manifest keeps them
        total += chunk.size();
      }
    }
    times.push_back(SecondsSince(start));
  }
  return total / 1e6 / Median(times);
}

// One core of OpenSSL's SHA-256 on 4 MiB buffers (`openssl speed`), in MB/s; 0 when unavailable.
double OpensslSha256MBps(const std::string& log) {
  Result<std::string> out =
      Shell("openssl speed -mr -seconds 1 -bytes 4194304 -evp sha256 2>/dev/null", log);
  if (!out.ok()) return 0;
  const size_t at = out->rfind("+F:");
  const size_t colon = at == std::string::npos ? at : out->rfind(':');
  return colon == std::string::npos ? 0 : std::atof(out->c_str() + colon + 1) / 1e6;
}

// `ours` against `reel storage cp` of `file` (to work/copied/COPY_NAME), alternated `repeat`
// times so that both see the same page cache and disk: the median seconds of each. `ours(i)`
// does its own set-up, syncs, and returns the seconds of the part that counts; cp runs after a
// sync too.
Result<std::pair<double, double>> AgainstStorageCp(const std::string& file,
                                                   const std::string& copy_name,
                                                   const std::string& work,
                                                   const std::string& reel_cli, int repeat,
                                                   const std::function<Result<double>(int)>& ours) {
  using reel::testing::ShellQuote;
  const std::string cp = ShellQuote(reel_cli) + " storage cp -q " + ShellQuote(file) + " " +
                         ShellQuote(work + "/copied/" + copy_name);
  std::vector<double> times, copies;
  for (int i = 0; i < repeat; ++i) {
    REEL_ASSIGN_OR_RETURN(double seconds, ours(i));
    times.push_back(seconds);
    ::sync();
    const Clock::time_point start = Clock::now();
    REEL_RETURN_IF_ERROR(Shell(cp, work + "/peers.log").status());
    copies.push_back(SecondsSince(start));
  }
  return std::make_pair(Median(times), Median(copies));
}

// A pull's figure from its and `reel storage cp`'s seconds: goal 0.8x of the copy.
Figure PullFigure(const std::string& section, const std::string& name, uint64_t file_bytes,
                  std::pair<double, double> seconds, const std::string& note) {
  const double cp = file_bytes / 1e6 / seconds.second;
  Figure f =
      MakeFigure(section, name, file_bytes / 1e6 / seconds.first, "MB/s", Goal::kAtLeast, 0.8 * cp);
  f.peer_name = "reel storage cp";
  f.peer = cp;
  f.note = note;
  return f;
}

// The pull of `row`'s version into a safetensors file as `reel models export` writes it (fsynced,
// as `reel storage cp` writes), checked bit for bit against the file registered, against `reel
// storage cp` of that file.
Result<std::pair<double, double>> PullAndCopySeconds(Registry& registry, const VersionRow& row,
                                                     const std::string& work,
                                                     const std::string& reel_cli, int repeat) {
  REEL_ASSIGN_OR_RETURN(std::string expected, ReadFile(row.path));
  REEL_ASSIGN_OR_RETURN(auto out, reel::storage::LocalStore::Open(work + "/pulled"));
  const std::string name = row.label + ".safetensors";
  return AgainstStorageCp(row.path, name, work, reel_cli, repeat, [&](int) -> Result<double> {
    ::sync();
    const Clock::time_point start = Clock::now();
    REEL_ASSIGN_OR_RETURN(VersionInfo v, registry.Get(row.info.id.ToString()));
    REEL_ASSIGN_OR_RETURN(auto writer, out->OpenWriter(name));
    REEL_RETURN_IF_ERROR(registry.PullWeightsTo(v, *writer));
    REEL_RETURN_IF_ERROR(writer->Close());
    const double seconds = SecondsSince(start);
    REEL_ASSIGN_OR_RETURN(std::string bytes, out->Get(name));
    if (bytes != expected) return reel::DataLossError(row.label + ": the pull differs");
    return seconds;
  });
}

// The same pull as the command a user runs, `reel models export` (so a process start, as the
// peer's own), against `reel storage cp`; the export is checked bit for bit too.
Result<std::pair<double, double>> ExportAndCopySeconds(const VersionRow& row,
                                                       const std::string& work,
                                                       const std::string& reel_cli, int repeat) {
  using reel::testing::ShellQuote;
  REEL_ASSIGN_OR_RETURN(std::string expected, ReadFile(row.path));
  const std::string name = row.label + ".safetensors";
  return AgainstStorageCp(row.path, name, work, reel_cli, repeat, [&](int i) -> Result<double> {
    const std::string dir = work + "/exported-" + std::to_string(i);
    ::sync();
    const Clock::time_point start = Clock::now();
    REEL_RETURN_IF_ERROR(Shell(ShellQuote(reel_cli) + " models export " +
                                   ShellQuote(row.info.id.ToString()) + " " + ShellQuote(dir) +
                                   " --registry " + ShellQuote(work + "/registry"),
                               work + "/peers.log")
                             .status());
    const double seconds = SecondsSince(start);
    REEL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(dir + "/model.safetensors"));
    if (bytes != expected) return reel::DataLossError(row.label + ": the export differs");
    std::filesystem::remove_all(dir);
    return seconds;
  });
}

// The version most of whose bytes sit deepest in delta chains: the slowest to pull.
const VersionRow& DeepestVersion(const Scenarios& s) {
  const VersionRow* deepest = &s.base;
  for (const VersionRow* r : {&s.head, &s.full}) deepest = r->depth > deepest->depth ? r : deepest;
  for (const VersionRow& r : s.run) deepest = r.depth > deepest->depth ? &r : deepest;
  return *deepest;
}

// A push's speed: MB per wall second and per CPU second (user and system, every thread).
struct Speed {
  double wall_mbps = 0, cpu_mbps = 0;
};

// Where a push's delta bases come from: the cache of the pushes before it in the same process; a
// folder the pushes before kept them in, read by a new store and cache (a new process, as `reel
// models register` is); or nowhere, each base's whole chain decoded from the store.
enum class Bases { kMemory, kFolder, kNone };

// The median speed of pushing the last of `versions` into an in-memory store after the others,
// each the parent of the next: the codec's own speed (SHA-256, the bases read back, residuals,
// planes, zstd) without the disk. `folder`: where kFolder keeps the bases.
Result<Speed> InMemoryPush(const std::vector<const SafetensorsFile*>& versions, Bases bases,
                           const std::string& folder, int threads, int repeat) {
  using reel::registry::ChunkCache;
  std::vector<double> wall, cpu;
  uint64_t raw = 0;
  const auto options = [&] {
    reel::registry::WeightStoreOptions o;
    o.threads = threads;
    if (bases == Bases::kNone) o.base_cache = std::make_shared<ChunkCache>(0);
    if (bases == Bases::kFolder) {
      o.base_cache = std::make_shared<ChunkCache>(reel::registry::kDefaultBaseCacheBytes, folder);
    }
    return o;
  };
  for (int i = 0; i < repeat; ++i) {
    std::filesystem::remove_all(folder);
    auto memory = std::make_shared<reel::storage::MemoryStore>("bench");
    reel::registry::WeightStore store(memory, "", options());
    reel::registry::WeightManifest parent;
    for (size_t v = 0; v + 1 < versions.size(); ++v) {
      REEL_ASSIGN_OR_RETURN(parent, store.Push(*versions[v], v == 0 ? nullptr : &parent));
    }
    REEL_RETURN_IF_ERROR(store.PersistBaseCache());
    // kFolder: a store with a cache of its own, as in a new process; else the same store.
    reel::registry::WeightStore next(memory, "", options());
    reel::registry::WeightStore& pusher = bases == Bases::kFolder ? next : store;
    reel::registry::PushStats stats;
    const double cpu_before = ProcessCpuSeconds();
    const Clock::time_point start = Clock::now();
    REEL_RETURN_IF_ERROR(pusher.Push(*versions.back(), &parent, &stats).status());
    wall.push_back(SecondsSince(start));
    cpu.push_back(ProcessCpuSeconds() - cpu_before);
    raw = stats.raw_bytes;
  }
  std::filesystem::remove_all(folder);
  return Speed{raw / 1e6 / Median(wall), raw / 1e6 / std::max(1e-9, Median(cpu))};
}

// The base and the run's checkpoints up to the deepest delta chain (the one before a checkpoint
// that starts a new chain), read back from their files: the longest chains a push decodes its bases
// from.
Result<std::vector<SafetensorsFile>> DeepestRun(const Scenarios& s) {
  std::vector<SafetensorsFile> out;
  out.push_back(s.base_weights);
  for (const VersionRow& r : s.run) {
    // Its base's chain was full: it started a new one (on the chain's whole chunk).
    if (r.depth != static_cast<int>(out.size())) break;
    REEL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(r.path));
    REEL_ASSIGN_OR_RETURN(SafetensorsFile f, reel::models::ReadSafetensors(bytes, r.path));
    out.push_back(std::move(f));
  }
  return out;
}

// Median seconds of the push of `changed` after `parent` into a local folder with compression off
// (chunks stored as they are, fsynced in groups), and of `reel storage cp` of `changed_path`:
// what the registry's content addressing costs beside a plain copy.
Result<std::pair<double, double>> UncompressedPushAndCopySeconds(
    const SafetensorsFile& parent, const SafetensorsFile& changed, const std::string& changed_path,
    const std::string& work, const std::string& reel_cli, int repeat) {
  reel::registry::WeightStoreOptions off;
  off.compress = false;
  return AgainstStorageCp(
      changed_path, "uncompressed.safetensors", work, reel_cli, repeat,
      [&](int i) -> Result<double> {
        const std::string folder = work + "/uncompressed-" + std::to_string(i);
        REEL_ASSIGN_OR_RETURN(auto local, reel::storage::LocalStore::Open(folder));
        reel::registry::WeightStore store(std::move(local), "", off);
        REEL_ASSIGN_OR_RETURN(reel::registry::WeightManifest base, store.Push(parent, nullptr));
        ::sync();
        const Clock::time_point start = Clock::now();
        REEL_RETURN_IF_ERROR(store.Push(changed, &base).status());
        const double seconds = SecondsSince(start);
        std::filesystem::remove_all(folder);
        return seconds;
      });
}

// Median wall and CPU MB/s of the pushes of `rows`, and borg's median MB/s on the same files.
struct PushFigures {
  double wall_mbps = 0, cpu_mbps = 0, borg_mbps = 0;
  double cpu_seconds = 0, wall_seconds = 0;  // of all the pushes
};

PushFigures PushOf(const std::vector<const VersionRow*>& rows) {
  std::vector<double> wall, cpu, borg;
  PushFigures f;
  for (const VersionRow* r : rows) {
    f.wall_seconds += r->reel_seconds;
    f.cpu_seconds += r->reel_cpu_seconds;
    wall.push_back(r->raw_bytes / 1e6 / r->reel_seconds);
    cpu.push_back(r->raw_bytes / 1e6 / std::max(1e-9, r->reel_cpu_seconds));
    if (auto it = r->peer_seconds.find("borg zstd,1");
        it != r->peer_seconds.end() && it->second > 0)
      borg.push_back(r->file_bytes / 1e6 / it->second);
  }
  f.wall_mbps = Median(wall);
  f.cpu_mbps = Median(cpu);
  f.borg_mbps = Median(borg);
  return f;
}

int StoreThreads(const Args& args) {
  return args.store_threads > 0
             ? args.store_threads
             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

Status AddThroughputFigures(const Args& args, const std::string& work, const std::string& reel_cli,
                            Scenarios& s, StorageRun& storage, std::vector<Figure>* figures) {
  const std::string section = "throughput";
  Progress("hash and split");
  Figure hash = MakeFigure(section, "hash + split (SHA-256 of 4 MiB chunks)",
                           HashSplitMBps(s.base_weights, 3), "MB/s", Goal::kAtLeast, 1500);
  hash.peer_name = "openssl speed sha256";
  hash.peer = OpensslSha256MBps(work + "/peers.log");
  figures->push_back(hash);

  std::vector<const VersionRow*> run;
  for (const VersionRow& r : s.run) run.push_back(&r);
  // Per core: MB per CPU-second of the whole process, against borg's one thread.
  const int threads = StoreThreads(args);
  const PushFigures a = PushOf(run), c = PushOf({&s.full});
  for (const auto& [name, p] : {std::make_pair("push, (a) run checkpoint (median)", a),
                                std::make_pair("push, (c) full fine-tune", c)}) {
    Figure f = MakeFigure(section, std::string(name) + ", per core", p.cpu_mbps, "MB/s",
                          Goal::kAtLeast, 250);
    f.peer_name = p.borg_mbps > 0 ? "borg create" : "";
    f.peer = p.borg_mbps;
    char note[224];
    std::snprintf(note, sizeof note,
                  "MB per CPU-second; wall %s MB/s on %d threads, the CPUs busy %.0f%% of it (the "
                  "rest: fsync, reads); bases from the cache of the push before",
                  Number(p.wall_mbps).c_str(), threads,
                  100 * p.cpu_seconds / (p.wall_seconds * threads));
    f.note = note;
    figures->push_back(f);
  }

  Progress("push into memory");
  const std::string bases_folder = work + "/cache-bases";
  REEL_ASSIGN_OR_RETURN(const Speed memory_c,
                        InMemoryPush({&s.base_weights, &s.full_weights}, Bases::kMemory,
                                     bases_folder, threads, args.repeat));
  REEL_ASSIGN_OR_RETURN(std::vector<SafetensorsFile> deepest, DeepestRun(s));
  std::vector<const SafetensorsFile*> chain;
  for (const SafetensorsFile& f : deepest) chain.push_back(&f);
  REEL_ASSIGN_OR_RETURN(const Speed folder,
                        InMemoryPush(chain, Bases::kFolder, bases_folder, threads, args.repeat));
  REEL_ASSIGN_OR_RETURN(const Speed cold,
                        InMemoryPush(chain, Bases::kNone, bases_folder, threads, args.repeat));
  const std::string depth = std::to_string(deepest.size() - 2);
  const std::vector<std::tuple<std::string, Speed, std::string>> in_memory = {
      {"push, (c) full fine-tune, into memory, per core", memory_c,
       "the codec alone: no disk, no database"},
      {"push, (a) onto depth " + depth + ", a new process, into memory, per core", folder,
       "as `reel models register` on a folder registry pushes: the bases (and theirs) read from "
       "the folder's cache/bases, which the last process kept, and checked against their "
       "addresses"},
      {"push, (a) onto depth " + depth + ", no base cache, into memory, per core", cold,
       "as a new process on another machine pushes: every base's chain decoded from the "
       "store"}};
  for (const auto& [name, speed, note] : in_memory) {
    Figure f = MakeFigure(section, name, speed.cpu_mbps, "MB/s", Goal::kAtLeast, 250);
    f.peer_name = c.borg_mbps > 0 ? "borg create" : "";
    f.peer = c.borg_mbps;
    f.note = note + "; wall " + Number(speed.wall_mbps) + " MB/s on " + std::to_string(threads) +
             " threads";
    figures->push_back(f);
  }

  Progress("push with compression off against reel storage cp");
  REEL_ASSIGN_OR_RETURN(auto uncompressed,
                        UncompressedPushAndCopySeconds(s.base_weights, s.full_weights, s.full.path,
                                                       work, reel_cli, args.repeat));
  const double off_mbps = s.full.file_bytes / 1e6 / uncompressed.first;
  const double off_cp = s.full.file_bytes / 1e6 / uncompressed.second;
  Figure off = MakeFigure(section, "push, (c) full fine-tune, compression off, to a folder",
                          off_mbps, "MB/s", Goal::kAtLeast, 0.8 * off_cp);
  off.peer_name = "reel storage cp";
  off.peer = off_cp;
  off.note = "chunks stored as they are, made durable in groups of 64; no database";
  figures->push_back(off);

  std::vector<const VersionRow*> pulled = {&DeepestVersion(s)};
  if (pulled.front() != &s.base) pulled.push_back(&s.base);
  // Any version, as another process pulls it: every chunk's chain decoded from the store.
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<Registry> uncached, storage.OpenUncached());
  for (const VersionRow* r : pulled) {
    Progress("pull of " + r->label + " against reel storage cp");
    REEL_ASSIGN_OR_RETURN(auto times,
                          PullAndCopySeconds(*uncached, *r, work, reel_cli, args.repeat));
    figures->push_back(PullFigure(
        section, "pull " + r->label + ", delta depth " + std::to_string(r->depth) + ", to a file",
        r->file_bytes, times,
        "in this process, no chunk cached; the peer's time includes its process's start"));
  }
  const VersionRow& deep = *pulled.front();
  // The version just registered (a run's last checkpoint): its chunks are in the push's cache.
  Progress("pull of " + deep.label + " just registered again against reel storage cp");
  REEL_RETURN_IF_ERROR(storage.RegisterAgain(deep, "again"));
  REEL_ASSIGN_OR_RETURN(auto warm,
                        PullAndCopySeconds(storage.registry(), deep, work, reel_cli, args.repeat));
  figures->push_back(PullFigure(section, "pull " + deep.label + " just registered, to a file",
                                deep.file_bytes, warm,
                                "in this process, its chunks copied from the push's cache and "
                                "checked, not decoded"));
  Progress("reel models export of " + deep.label + " against reel storage cp");
  REEL_ASSIGN_OR_RETURN(auto times, ExportAndCopySeconds(deep, work, reel_cli, args.repeat));
  const double exported = deep.file_bytes / 1e6 / times.first;
  const double cp = deep.file_bytes / 1e6 / times.second;
  Figure f = MakeFigure(section,
                        "pull " + deep.label + ", delta depth " + std::to_string(deep.depth) +
                            ", the command reel models export",
                        exported, "MB/s", Goal::kAtLeast, 0.8 * cp);
  f.peer_name = "reel storage cp";
  f.peer = cp;
  f.note = "both commands, each with its process's start";
  figures->push_back(f);
  return Status::Ok();
}

}  // namespace reel::registry_bench
