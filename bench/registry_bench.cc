// registry_bench: what Reel's model registry stores per version and how fast it moves weights,
// beside what teams use today (issue 14's goals):
//   - bytes added per version for torchvision's R(2+1)D-18 (400 classes, 126 MB of F32), built and
//     trained for real by Reel on synthetic clips: the first version, (a) ten successive
//     checkpoints of one run, (b) a head-only fine-tune (only fc changes), (c) a full fine-tune;
//     beside one safetensors file per version (MLflow, W&B), git-lfs (bytes under
//     .git/lfs/objects), borg (zstd,1; unique_csize of `borg info --json`) and casync (zstd; its
//     chunk store and index). Goals: first version <= 0.88x its file, (a) and (c) <= 55%, (b) <=
//     0.1% of one version.
//   - hash and split (SHA-256 per chunk, as WeightStore does) against `openssl speed`; the push of
//     a changed version (deltas + zstd, one thread) against `borg create`, and with compression
//     off against `reel storage cp` of the same file; the pull of a version into a safetensors
//     file against `reel storage cp` of the same file.
//   - listing and search latency in a registry of 10,000 versions (goal < 50 ms), in this
//     process and as the commands a person types.
//
//   registry_bench [--work DIR] [--json FILE] [--reel PATH] [--threads N] [--batch N]
//                  [--frames N] [--size N] [--steps N] [--finetune-steps N]
//                  [--optimizer adamw|sgd] [--lr X] [--list-versions N] [--repeat N]
//                  [--list-repeat N] [--no-peers] [--keep]
// Defaults: AdamW lr 1e-4, clips 2 x 3 x 8 x 56 x 56, 2 steps between checkpoints, 4 steps per
// fine-tune, 10,000 listed versions; about 4 minutes on 2 cores. Training is seeded: the weights,
// and so every byte count, are the same on every run.
// bench/run_registry_bench.sh installs the peers (borgbackup, casync, git-lfs from Debian), builds
// this and `reel`, and runs it. Progress goes to stderr, the tables to stdout; --json FILE writes
// every figure as {"name","value","unit","limit","limit_ratio","peer","peer_ratio"} records.
// The parts: registry_bench_util.{h,cc} (command line, clocks, shell, the machine, figures),
// registry_bench_storage.{h,cc} (training, the peers, the versions stored), registry_bench_speed.cc
// (throughput); here the storage table, the listing figures and main.
#include <torch/torch.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/allocator.h"
#include "base/status.h"
#include "bench/registry_bench_storage.h"
#include "bench/registry_bench_util.h"
#include "db/database.h"
#include "registry/model_uri.h"
#include "registry/registry.h"
#include "registry/weight_store.h"
#include "storage/local_store.h"
#include "testing/shell.h"

namespace {

using namespace reel::registry_bench;  // NOLINT(google-build-using-namespace)
using reel::Result;
using reel::Status;

// ---------------------------------------------------------------------------------------------
// Storage figures: the table and the records.

struct StorageLine {
  std::string label;
  double file = 0;                      // mean safetensors bytes of the versions
  std::map<std::string, double> added;  // tool ("Reel", peers) -> mean bytes added
  Goal goal = Goal::kNone;
  double limit_percent = 0;
};

StorageLine MeanLine(const std::string& label, const std::vector<const VersionRow*>& rows,
                     const std::vector<std::string>& peers) {
  StorageLine line;
  line.label = label;
  for (const VersionRow* r : rows) {
    line.file += r->file_bytes / double(rows.size());
    line.added["Reel"] += r->reel_added / double(rows.size());
    for (const std::string& p : peers) line.added[p] += r->peer_added.at(p) / double(rows.size());
  }
  return line;
}

// The run's checkpoint that added the most to Reel's store.
const VersionRow* WorstRun(const std::vector<VersionRow>& run) {
  const VersionRow* worst = &run.front();
  for (const VersionRow& r : run) {
    if (r.reel_added > worst->reel_added) worst = &r;
  }
  return worst;
}

std::vector<StorageLine> StorageLines(const Scenarios& s, const std::vector<std::string>& peers) {
  std::vector<const VersionRow*> run;
  for (const VersionRow& r : s.run) run.push_back(&r);
  std::vector<StorageLine> lines = {
      MeanLine("first version (the base)", {&s.base}, peers),
      MeanLine("(a) run checkpoint, mean of " + std::to_string(s.run.size()), run, peers),
      MeanLine("(a) run checkpoint, worst (" + WorstRun(s.run)->label + ")", {WorstRun(s.run)},
               peers),
      MeanLine("(b) head-only fine-tune", {&s.head}, peers),
      MeanLine("(c) full fine-tune", {&s.full}, peers)};
  const std::pair<Goal, double> goals[] = {{Goal::kAtMost, 88},
                                           {Goal::kAtMost, 55},
                                           {Goal::kNone, 0},
                                           {Goal::kAtMost, 0.1},
                                           {Goal::kAtMost, 55}};
  for (size_t i = 0; i < lines.size(); ++i) {
    lines[i].goal = goals[i].first;
    lines[i].limit_percent = goals[i].second;
  }
  return lines;
}

// The chunking tool that stored the line for the fewest bytes ("" without peers).
std::string BestChunker(const StorageLine& line) {
  std::string best;
  for (const char* tool : {"borg zstd,1", "casync zstd"}) {
    if (line.added.count(tool) != 0 && (best.empty() || line.added.at(tool) < line.added.at(best)))
      best = tool;
  }
  return best;
}

std::string Percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 1 ? "%.3f%%" : "%.1f%%", v);
  return buf;
}

// One row per line: every tool's bytes and share of the file, then Reel against the goal and
// against the chunking tool that did best.
void PrintStorageTable(const std::vector<StorageLine>& lines,
                       const std::vector<std::string>& tools) {
  std::printf("%-34s", "");
  for (const std::string& t : tools) std::printf("  %17s", t.c_str());
  std::printf("  %-9s %9s %-6s  %s\n", "goal", "Reel/goal", "", "Reel/best chunker");
  for (const StorageLine& l : lines) {
    std::printf("%-34s", l.label.c_str());
    for (const std::string& t : tools) {
      const double bytes = t == "safetensors file" ? l.file : l.added.at(t);
      std::printf("  %10s %6s", FormatBytes(bytes).c_str(), Percent(100 * bytes / l.file).c_str());
    }
    const double reel = 100 * l.added.at("Reel") / l.file;
    const bool goal = l.goal != Goal::kNone;
    std::printf("  %-9s %9s %-6s", goal ? ("<= " + Percent(l.limit_percent)).c_str() : "-",
                goal ? Ratio(reel / l.limit_percent).c_str() : "",
                goal ? (reel <= l.limit_percent ? "meets" : "MISSES") : "");
    if (const std::string best = BestChunker(l); !best.empty()) {
      std::printf("  %s (%s)", Ratio(l.added.at("Reel") / l.added.at(best)).c_str(), best.c_str());
    }
    std::printf("\n");
  }
}

void AddStorageFigures(const std::vector<StorageLine>& lines, const std::vector<std::string>& peers,
                       std::vector<Figure>* figures) {
  for (const StorageLine& l : lines) {
    Figure f = MakeFigure("bytes added per version", l.label + ", Reel",
                          100 * l.added.at("Reel") / l.file, "% of file", l.goal, l.limit_percent);
    if (const std::string best = BestChunker(l); !best.empty()) {
      f.peer_name = best;
      f.peer = 100 * l.added.at(best) / l.file;
    }
    figures->push_back(f);
    for (const std::string& p : peers) {
      figures->push_back(MakeFigure("bytes added per version", l.label + ", " + p,
                                    100 * l.added.at(p) / l.file, "% of file"));
    }
  }
}

void PrintRunDetail(const Scenarios& s) {
  std::printf("Reel per run checkpoint (%% of its file; delta depth):");
  for (const VersionRow& r : s.run) {
    std::printf(" %.1f%%(%d)", 100.0 * r.reel_added / r.file_bytes, r.depth);
  }
  std::printf(
      "\n  where the depth falls back to 1 the chain reached max_chain deltas: that checkpoint "
      "starts a new chain, a delta against the old chain's whole chunk, so every pull decodes "
      "a bounded chain\n");
  std::printf("each version's weight manifest (in the registry's database, counted above): %s\n",
              FormatBytes(s.base.manifest_bytes).c_str());
  std::printf("tensors changed: head-only %d of %d (fc.weight, fc.bias), full fine-tune %d of %d\n",
              s.head_changed_tensors, s.tensors, s.full_changed_tensors, s.tensors);
}

// ---------------------------------------------------------------------------------------------
// Listing and search with many versions.

// A registry for the listing figures. Filling it registers thousands of versions, one
// transaction each; with the database's and the store's fsyncs off that takes seconds instead of
// minutes, and reads (all that is measured here) do not depend on it.
Result<std::unique_ptr<Registry>> OpenScratchRegistry(const std::string& folder) {
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<reel::db::Database> db,
                        reel::db::OpenSqlite(folder + "/registry.db"));
  REEL_RETURN_IF_ERROR(db->ExecScript("PRAGMA synchronous = OFF;"));
  reel::storage::LocalStoreOptions o;
  o.fsync = false;
  REEL_ASSIGN_OR_RETURN(auto store, reel::storage::LocalStore::Open(folder, o));
  return Registry::Open(std::move(db), std::move(store), "weights/");
}

// An evaluation report of the main job's shape (8 classes), about 500 bytes of JSON.
nlohmann::json Report(int i) {
  const double top1 = (i % 1000) / 1000.0;
  nlohmann::json confusion = nlohmann::json::array();
  for (int c = 0; c < 8; ++c) {
    std::vector<int> row(8, 0);
    row[c] = 30 + (i + c) % 7;
    confusion.push_back(row);
  }
  return {{"class_names",
           {"MoveLeft", "MoveRight", "MoveUp", "MoveDown", "RotateClockwise",
            "RotateCounterClockwise", "Grow", "Shrink"}},
          {"clips", 266},
          {"confusion", confusion},
          {"per_class", std::vector<double>(8, top1)},
          {"per_class_count", std::vector<int>(8, 33)},
          {"top1", top1},
          {"top5", 1.0},
          {"video_top1", top1},
          {"videos", 160}};
}

// `n` versions of one model, each as a run's registration records it: the names and shapes of
// R(2+1)D-18's 224 tensors (so a weight manifest of about 50 kB; their bytes are a few zeros,
// unchanged from version to version, so that filling stores nothing new), a 2 kB training
// config, an evaluation report and a tag; and an alias at the middle one.
Status FillRegistry(Registry& registry, const SafetensorsFile& shapes, int n) {
  reel::registry::NewVersion nv;
  nv.model = "listing";
  nv.architecture = {{"name", "r2plus1d_18"}, {"num_classes", kClasses}};
  for (const auto& [name, t] : shapes.tensors) {
    nv.weights.tensors[name] = {t.dtype, {1}, std::string(reel::models::DtypeSize(t.dtype), '\0')};
  }
  for (int line = 0; nv.config.size() < 2000; ++line) {
    nv.config += "section_" + std::to_string(line / 8) + ".key_" + std::to_string(line) +
                 ": value " + std::to_string(line) + "\n";
  }
  const reel::registry::Actor who = reel::registry::Actor::Local();
  for (int i = 1; i <= n; ++i) {
    nv.metrics = Report(i);
    nv.tags = {{"step", std::to_string(100 * i)}};
    nv.message = "checkpoint " + std::to_string(i);
    nv.parents.clear();
    if (i > 1) nv.parents.push_back({nv.model, i - 1});
    REEL_RETURN_IF_ERROR(registry.Register(nv, who).status());
    if (i % 2000 == 0) Progress("listing registry: " + std::to_string(i) + " versions");
  }
  return registry.SetAlias(nv.model, "production", n / 2, who);
}

struct Latency {
  double median_ms = 0, max_ms = 0;
};

// One warm-up run, then `repeat` timed runs of `op`.
Result<Latency> Measure(int repeat, const std::function<Status()>& op) {
  REEL_RETURN_IF_ERROR(op());
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    const Clock::time_point start = Clock::now();
    REEL_RETURN_IF_ERROR(op());
    ms.push_back(1e3 * SecondsSince(start));
  }
  return Latency{Median(ms), *std::max_element(ms.begin(), ms.end())};
}

// A listing latency's figure (goal 50 ms), its note `note_prefix` and the slowest run.
Figure ListingFigure(const std::string& versions, const std::string& name, const Latency& l,
                     int repeat, const std::string& note_prefix) {
  Figure f = MakeFigure("listing and search, " + versions + " versions in one model",
                        name + ", median", l.median_ms, "ms", Goal::kAtMost, 50);
  char max[64];
  std::snprintf(max, sizeof max, "max %.3g ms of %d runs", l.max_ms, repeat);
  f.note = note_prefix + max;
  return f;
}

// The same reads as a person types them, `reel models ...`: its process's start counts (and
// /bin/sh's, about a millisecond), printing to /dev/null.
Status AddListingCommandFigures(const Args& args, const std::string& registry_dir,
                                const std::string& reel_cli, std::vector<Figure>* figures) {
  using reel::testing::ShellQuote;
  const std::string n = std::to_string(args.list_versions);
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"the command reel models ls listing (all " + n + ")", "models ls listing"},
      {"the command reel models ls", "models ls"},
      {"the command reel models show models:/listing@production",
       "models show models:/listing@production"}};
  for (const auto& [name, command] : commands) {
    const std::string line = ShellQuote(reel_cli) + " " + command + " --registry " +
                             ShellQuote(registry_dir) + " > /dev/null";
    REEL_ASSIGN_OR_RETURN(Latency l, Measure(args.list_repeat, [&] {
                            return Shell(line, registry_dir + "/commands.log").status();
                          }));
    figures->push_back(ListingFigure(n, name, l, args.list_repeat, "process start included; "));
  }
  return Status::Ok();
}

Status AddListingFigures(const Args& args, const std::string& work, const std::string& reel_cli,
                         const SafetensorsFile& shapes, std::vector<Figure>* figures) {
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<Registry> registry, OpenScratchRegistry(work + "/listing"));
  const Clock::time_point start = Clock::now();
  REEL_RETURN_IF_ERROR(FillRegistry(*registry, shapes, args.list_versions));
  const double fill_s = SecondsSince(start);
  const std::string n = std::to_string(args.list_versions);
  const std::string middle = std::to_string(args.list_versions / 2);
  const std::vector<std::pair<std::string, std::function<Status()>>> ops = {
      {"ListVersions (all " + n + ")",
       [&]() -> Status {
         REEL_ASSIGN_OR_RETURN(auto v, registry->ListVersions("listing"));
         return v.size() == size_t(args.list_versions) ? Status::Ok()
                                                       : reel::InternalError("ListVersions");
       }},
      {"ListModels", [&] { return registry->ListModels().status(); }},
      {"Get models:/listing/" + middle,
       [&] { return registry->Get("models:/listing/" + middle).status(); }},
      {"Get models:/listing (branch head)",
       [&] { return registry->Get("models:/listing").status(); }},
      {"Resolve models:/listing@production",
       [&]() -> Status {
         REEL_ASSIGN_OR_RETURN(auto ref,
                               reel::registry::ParseModelUri("models:/listing@production"));
         return registry->Resolve(ref).status();
       }},
      {"Get models:/listing@production",
       [&] { return registry->Get("models:/listing@production").status(); }}};
  for (const auto& [name, op] : ops) {
    REEL_ASSIGN_OR_RETURN(Latency l, Measure(args.list_repeat, op));
    figures->push_back(ListingFigure(n, name, l, args.list_repeat, ""));
  }
  REEL_RETURN_IF_ERROR(AddListingCommandFigures(args, work + "/listing", reel_cli, figures));
  REEL_ASSIGN_OR_RETURN(VersionInfo last, registry->Get("models:/listing"));
  Progress("filled the listing registry in " + std::to_string(fill_s).substr(0, 5) +
           " s; a version's weight manifest: " +
           FormatBytes(reel::registry::ManifestToJson(last.weights).size()) + ", config " +
           FormatBytes(last.config.size()) + ", report " + FormatBytes(last.metrics.dump().size()));
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------

std::string FindReelCli(const std::string& flag) {
  if (!flag.empty()) return flag;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);  // <build>/bench/registry_bench
  return (self.parent_path().parent_path() / "apps/reel/reel").string();
}

Result<std::string> MakeWorkFolder(const std::string& flag) {
  if (!flag.empty()) {
    REEL_RETURN_IF_ERROR(MakeFolder(flag));
    std::error_code ec;
    return fs::absolute(flag, ec).string();
  }
  std::string pattern = "/tmp/reel-registry-bench-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return reel::ErrnoToStatus(errno, "mkdtemp");
  return pattern;
}

void PrintHeader(const Machine& m, const Args& args, const Scenarios& s) {
  std::printf(
      "registry_bench: torchvision's R(2+1)D-18 (%d classes), %s of weights, %d tensors; "
      "one version = its safetensors file, %s\n",
      kClasses, FormatBytes(s.base.raw_bytes).c_str(), s.tensors,
      FormatBytes(s.base.file_bytes).c_str());
  std::printf(
      "machine: %s, %d cores (nproc); training: LibTorch %d threads, OMP_WAIT_POLICY=%s; "
      "registry push and pull: %s; load average %s at the start, %s at the end\n",
      m.cpu.c_str(), m.cores, m.torch_threads, m.omp_wait_policy.c_str(),
      args.store_threads > 0 ? (std::to_string(args.store_threads) + " threads").c_str()
                             : "a thread per core",
      m.load_start.c_str(), LoadAverage().c_str());
  std::printf(
      "training: %s, lr %g, on random clips %d x 3 x %d x %d x %d; (a) %d "
      "checkpoints %d steps apart, (b) and (c) %d steps each (%.1f s of training)\n",
      args.optimizer == "sgd" ? "SGD momentum 0.9 weight decay 1e-4" : "AdamW weight decay 0.01",
      args.lr, args.batch, args.frames, args.size, args.size, args.checkpoints, args.steps,
      args.finetune_steps, s.train_seconds);
  std::printf(
      "registry: 4 MiB chunks, at most %d deltas in a chain%s, zstd level 1, local folder, fsync "
      "on; MB = 10^6 bytes\n",
      args.max_chain, args.max_chain == 8 ? " (the default)" : "");
}

// The scratch folder, unless the user named it or asked to keep it.
void RemoveScratch(const Args& args, const std::string& work) {
  if (args.keep || !args.work.empty()) return;
  Progress("removing " + work);
  std::error_code ec;
  fs::remove_all(work, ec);
}

// --listing-only: the listing figures alone, in seconds.
Status RunListingOnly(const Args& args, const std::string& work, const std::string& reel_cli,
                      const Machine& machine) {
  REEL_ASSIGN_OR_RETURN(const SafetensorsFile shapes, UntrainedWeights());
  std::vector<Figure> figures;
  REEL_RETURN_IF_ERROR(AddListingFigures(args, work, reel_cli, shapes, &figures));
  const std::string section =
      "listing and search, " + std::to_string(args.list_versions) + " versions in one model";
  std::printf("\nmachine: %s, %d cores (nproc)\n== %s ==\n", machine.cpu.c_str(), machine.cores,
              section.c_str());
  PrintFigures(figures, section);
  if (ReportFigures(figures, machine.torch_threads, args.json) != 0) {
    return reel::InternalError("cannot write " + args.json);
  }
  return Status::Ok();
}

Status Run(const Args& args) {
  const Machine machine = DescribeMachine(args.threads);
  torch::set_num_threads(machine.torch_threads);
  torch::manual_seed(1);
  REEL_ASSIGN_OR_RETURN(const std::string work, MakeWorkFolder(args.work));
  const std::string reel_cli = FindReelCli(args.reel);
  if (!fs::exists(reel_cli)) return reel::NotFoundError("no reel CLI at " + reel_cli + " (--reel)");
  Progress("scratch folder " + work);
  if (args.listing_only) {
    Status listed = RunListingOnly(args, work, reel_cli, machine);
    RemoveScratch(args, work);
    return listed;
  }

  reel::registry::WeightStoreOptions weights;
  weights.max_chain = args.max_chain;
  weights.threads = args.store_threads;
  StorageRun storage(work, args.peers, weights);
  REEL_RETURN_IF_ERROR(storage.Init());
  REEL_ASSIGN_OR_RETURN(Scenarios s, RunScenarios(args, storage));
  std::vector<std::string> tools = {"Reel", "safetensors file"};
  for (const std::string& p : storage.peer_names()) tools.push_back(p);
  const std::vector<StorageLine> lines = StorageLines(s, storage.peer_names());

  std::vector<Figure> figures;
  figures.push_back(MakeFigure("bytes added per version", "one version: its safetensors file",
                               s.base.file_bytes / 1e6, "MB"));
  AddStorageFigures(lines, storage.peer_names(), &figures);
  REEL_RETURN_IF_ERROR(AddThroughputFigures(args, work, reel_cli, s, storage, &figures));
  REEL_RETURN_IF_ERROR(AddListingFigures(args, work, reel_cli, s.base_weights, &figures));

  std::printf("\n");
  PrintHeader(machine, args, s);
  std::printf("\n== bytes added per version (%% of that version's safetensors file) ==\n");
  PrintStorageTable(lines, tools);
  PrintRunDetail(s);
  for (const std::string& section :
       {std::string("throughput"),
        "listing and search, " + std::to_string(args.list_versions) + " versions in one model"}) {
    std::printf("\n== %s ==\n", section.c_str());
    PrintFigures(figures, section);
  }
  if (ReportFigures(figures, machine.torch_threads, args.json) != 0) {
    return reel::InternalError("cannot write " + args.json);
  }
  RemoveScratch(args, work);
  Progress("done");
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  reel::RetainFreedHeapMemory();  // as `reel` (its registry commands and server) does
  Result<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "registry_bench: %s\n", args.status().ToString().c_str());
    return 2;
  }
  const Status status = Run(*args);
  if (!status.ok()) {
    std::fprintf(stderr, "registry_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
