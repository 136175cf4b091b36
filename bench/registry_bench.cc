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
//   - listing and search latency in a registry of 10,000 versions (goal < 50 ms).
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
#include <nlohmann/json.hpp>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/hash.h"
#include "base/json.h"
#include "base/status.h"
#include "db/database.h"
#include "models/model_zoo.h"
#include "models/safetensors.h"
#include "models/state_dict.h"
#include "registry/model_uri.h"
#include "registry/registry.h"
#include "registry/weight_store.h"
#include "storage/local_store.h"
#include "storage/memory_store.h"
#include "testing/shell.h"

namespace {

namespace fs = std::filesystem;
using reel::Result;
using reel::Status;
using reel::models::SafetensorsFile;
using reel::registry::Registry;
using reel::registry::VersionId;
using reel::registry::VersionInfo;
using Clock = std::chrono::steady_clock;

constexpr char kModel[] = "r2plus1d-18";
constexpr int kClasses = 400;  // torchvision's Kinetics-400 head: the 126 MB the issue measures

// ---------------------------------------------------------------------------------------------
// Command line, clocks, shell.

struct Args {
  std::string work;  // scratch folder; "" makes one under /tmp and removes it at the end
  std::string json;  // --json FILE
  std::string reel;  // the reel CLI; "" finds it beside this binary's build folder
  int threads = 0;   // LibTorch threads for training; 0: one per core
  int batch = 2, frames = 8, size = 56;
  int steps = 2;                    // optimizer steps between two checkpoints of the run (a)
  int finetune_steps = 4;           // optimizer steps of each fine-tune (b) and (c)
  std::string optimizer = "adamw";  // adamw (weight decay 0.01) or sgd (momentum 0.9, wd 1e-4)
  double lr = 0;                    // 0: as a fine-tune uses, 1e-4 for AdamW, 1e-3 for SGD
  int checkpoints = 10;
  int list_versions = 10000;
  int repeat = 3;        // runs per throughput figure (median)
  int list_repeat = 20;  // runs per listing figure (median)
  int max_chain = 8;     // WeightStoreOptions: deltas in a row before a chunk is stored whole
  int pull_threads = 0;  // WeightStoreOptions::threads: 0, one per core
  bool peers = true;
  bool keep = false;
};

constexpr char kUsage[] =
    "usage: registry_bench [--work DIR] [--json FILE] [--reel PATH] [--threads N] [--batch N]\n"
    "                      [--frames N] [--size N] [--steps N] [--finetune-steps N]\n"
    "                      [--optimizer adamw|sgd] [--lr X] [--list-versions N] [--repeat N]\n"
    "                      [--list-repeat N] [--max-chain N] [--pull-threads N] [--no-peers]\n"
    "                      [--keep]\n";

Result<double> ParseNumber(const std::string& flag, const std::string& text, double min) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= min)) {
    return reel::InvalidArgumentError(flag + ": expected a number >= " + std::to_string(min) +
                                      ", got '" + text + "'");
  }
  return v;
}

Result<Args> ParseArgs(int argc, char** argv) {
  Args a;
  std::map<std::string, std::string*> strings = {
      {"--work", &a.work}, {"--json", &a.json}, {"--reel", &a.reel}, {"--optimizer", &a.optimizer}};
  std::map<std::string, int*> ints = {{"--threads", &a.threads},
                                      {"--batch", &a.batch},
                                      {"--frames", &a.frames},
                                      {"--size", &a.size},
                                      {"--steps", &a.steps},
                                      {"--finetune-steps", &a.finetune_steps},
                                      {"--list-versions", &a.list_versions},
                                      {"--repeat", &a.repeat},
                                      {"--list-repeat", &a.list_repeat},
                                      {"--max-chain", &a.max_chain},
                                      {"--pull-threads", &a.pull_threads}};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-peers") {
      a.peers = false;
      continue;
    }
    if (flag == "--keep") {
      a.keep = true;
      continue;
    }
    if (strings.count(flag) == 0 && ints.count(flag) == 0 && flag != "--lr") {
      return reel::InvalidArgumentError("unknown flag " + flag + "\n" + kUsage);
    }
    if (i + 1 >= argc) return reel::InvalidArgumentError(flag + ": needs a value\n" + kUsage);
    const std::string value = argv[++i];
    if (auto s = strings.find(flag); s != strings.end()) {
      *s->second = value;
    } else if (auto n = ints.find(flag); n != ints.end()) {
      REEL_ASSIGN_OR_RETURN(double v, ParseNumber(flag, value, 0));
      *n->second = static_cast<int>(v);
    } else {
      REEL_ASSIGN_OR_RETURN(a.lr, ParseNumber(flag, value, 0));
    }
  }
  if (a.checkpoints < 1 || a.repeat < 1 || a.list_repeat < 1 || a.list_versions < 2 ||
      a.batch < 1 || a.frames < 1 || a.size < 16 ||
      (a.optimizer != "adamw" && a.optimizer != "sgd")) {
    return reel::InvalidArgumentError(std::string("values out of range\n") + kUsage);
  }
  if (a.lr == 0) a.lr = a.optimizer == "sgd" ? 1e-3 : 1e-4;
  return a;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The calling thread's seconds on a CPU and waiting in the run queue for one (the scheduler's
// own counts): the thread alone, not LibTorch's OpenMP workers, and the wait tells other
// processes on these cores apart from the disk.
struct ThreadTimes {
  double cpu = 0, waiting = 0;
};

ThreadTimes ThreadSchedTimes() {
  std::ifstream in("/proc/thread-self/schedstat");
  uint64_t cpu_ns = 0, waiting_ns = 0;
  in >> cpu_ns >> waiting_ns;
  return {cpu_ns / 1e9, waiting_ns / 1e9};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A progress line on stderr, with the seconds since the first one.
void Progress(const std::string& what) {
  static const Clock::time_point start = Clock::now();
  std::fprintf(stderr, "[%6.1f s] %s\n", SecondsSince(start), what.c_str());
}

// Runs `command` with /bin/sh; its stderr goes to `log`. Returns its stdout.
// Errors: Internal naming the command, its exit code and the end of its log.
Result<std::string> Shell(const std::string& command, const std::string& log) {
  reel::testing::CommandResult r =
      reel::testing::RunCommand("(" + command + ") 2>>" + reel::testing::ShellQuote(log));
  if (r.exit_code == 0) return r.output;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return reel::InternalError("`" + command + "` exited with " + std::to_string(r.exit_code) + ": " +
                             all.substr(all.size() > 600 ? all.size() - 600 : 0));
}

// Bytes of the regular files under `dir` (0 when it does not exist).
uint64_t TreeBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

Status MakeFolder(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return reel::InternalError("cannot create " + path + ": " + ec.message());
  return Status::Ok();
}

Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return reel::InternalError("cannot write " + path);
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return reel::NotFoundError("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB"};
  int u = 0;
  while (bytes >= 1000 && u < 3) {
    bytes /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

// ---------------------------------------------------------------------------------------------
// The machine and the figures.

// The 1, 5 and 15 minute load averages: other work on these cores skews every time measured.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

struct Machine {
  std::string load_start = LoadAverage();
  int cores = 1;
  std::string cpu;
  int torch_threads = 1;
  std::string omp_wait_policy;
};

Machine DescribeMachine(int threads) {
  Machine m;
  m.cores = std::max(1, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      m.cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  // Never more training threads than cores: oversubscribed OpenMP threads spin against each other.
  m.torch_threads = threads > 0 ? std::min(threads, m.cores) : m.cores;
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  m.omp_wait_policy = policy != nullptr ? policy : "unset";
  return m;
}

enum class Goal { kNone, kAtMost, kAtLeast };

struct Figure {
  std::string section, name;
  double value = 0;
  std::string unit;
  Goal goal = Goal::kNone;
  double limit = 0;
  std::string peer_name;  // "" when none
  double peer = 0;
  std::string note;  // printed after the row
};

Figure MakeFigure(std::string section, std::string name, double value, std::string unit,
                  Goal goal = Goal::kNone, double limit = 0) {
  Figure f;
  f.section = std::move(section);
  f.name = std::move(name);
  f.value = value;
  f.unit = std::move(unit);
  f.goal = goal;
  f.limit = limit;
  return f;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 10000 ? "%.0f" : "%.4g", v);
  return buf;
}

std::string Ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fx", r);
  return buf;
}

std::string GoalText(const Figure& f) {
  if (f.goal == Goal::kNone) return "";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s %s",
                f.goal == Goal::kAtMost ? "<=" : ">=", Number(f.limit).c_str());
  return buf;
}

bool MeetsGoal(const Figure& f) {
  return f.goal == Goal::kAtMost ? f.value <= f.limit : f.value >= f.limit;
}

// Columns of a figure's row: what, value and unit, goal with the ratio to it and whether it is
// met, peer with the ratio to it, then the note.
constexpr char kRowFormat[] = "%-42s %9s %-5s  %-9s %9s %-6s  %-20s %9s %9s  %s";

// Prints one row of kRowFormat, without trailing blanks.
template <typename... T>
void PrintRow(T... columns) {
  char line[512];
  std::snprintf(line, sizeof line, kRowFormat, columns...);
  std::string text = line;
  text.erase(text.find_last_not_of(' ') + 1);
  std::puts(text.c_str());
}

void PrintFigure(const Figure& f) {
  const bool goal = f.goal != Goal::kNone && f.limit > 0;
  const bool peer = !f.peer_name.empty() && f.peer > 0;
  PrintRow(f.name.c_str(), Number(f.value).c_str(), f.unit.c_str(),
           goal ? GoalText(f).c_str() : "-", goal ? Ratio(f.value / f.limit).c_str() : "",
           goal ? (MeetsGoal(f) ? "meets" : "MISSES") : "", peer ? f.peer_name.c_str() : "-",
           peer ? Number(f.peer).c_str() : "", peer ? Ratio(f.value / f.peer).c_str() : "",
           f.note.c_str());
}

void PrintFigures(const std::vector<Figure>& figures, const std::string& section) {
  PrintRow("", "value", "unit", "goal", "Reel/goal", "", "peer", "value", "Reel/peer", "");
  for (const Figure& f : figures) {
    if (f.section == section) PrintFigure(f);
  }
}

Status WriteJson(const std::vector<Figure>& figures, const std::string& path) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Figure& f : figures) {
    const bool goal = f.goal != Goal::kNone && f.limit > 0;
    const bool peer = !f.peer_name.empty() && f.peer > 0;
    std::string name = f.section + ": " + f.name;
    if (peer) name += " [peer: " + f.peer_name + "]";
    out.push_back({{"name", name},
                   {"value", f.value},
                   {"unit", f.unit},
                   {"limit", goal ? nlohmann::ordered_json(f.limit) : nlohmann::ordered_json()},
                   {"limit_ratio",
                    goal ? nlohmann::ordered_json(f.value / f.limit) : nlohmann::ordered_json()},
                   {"peer", peer ? nlohmann::ordered_json(f.peer) : nlohmann::ordered_json()},
                   {"peer_ratio",
                    peer ? nlohmann::ordered_json(f.value / f.peer) : nlohmann::ordered_json()}});
  }
  return WriteFile(path, out.dump(2) + "\n");
}

// ---------------------------------------------------------------------------------------------
// Weights that a real training run and real fine-tunes produce.

struct TrainOptions {
  int batch = 2, frames = 8, size = 56;
  std::string optimizer = "adamw";
  double lr = 1e-4;
};

// R(2+1)D-18 trained on random clips and labels: what the registry sees is a model whose every
// weight moved as real optimizer steps move it, which is all that matters here.
class Trainer {
 public:
  static Result<std::unique_ptr<Trainer>> Create(const TrainOptions& options) {
    reel::models::ModelSpec spec;
    spec.name = "r2plus1d_18";
    spec.num_classes = kClasses;
    REEL_ASSIGN_OR_RETURN(torch::nn::AnyModule model, reel::models::BuildModel(spec));
    return std::unique_ptr<Trainer>(new Trainer(std::move(model), options));
  }

  SafetensorsFile Weights() const { return reel::models::SaveStateDict(*model_.ptr()); }

  // Starts a new run from `weights` with a fresh optimizer: every weight trains, or (head_only)
  // only fc, with the backbone's batch-norm statistics frozen as a linear probe keeps them.
  Status Restart(const SafetensorsFile& weights, bool head_only) {
    REEL_RETURN_IF_ERROR(reel::models::LoadStateDict(*model_.ptr(), weights));
    std::vector<torch::Tensor> trainable;
    for (auto& item : model_.ptr()->named_parameters()) {
      const bool trains = !head_only || item.key().rfind("fc.", 0) == 0;
      item.value().set_requires_grad(trains);
      if (trains) trainable.push_back(item.value());
    }
    if (head_only) {
      model_.ptr()->eval();
    } else {
      model_.ptr()->train();
    }
    if (options_.optimizer == "sgd") {
      optimizer_ = std::make_unique<torch::optim::SGD>(
          trainable, torch::optim::SGDOptions(options_.lr).momentum(0.9).weight_decay(1e-4));
    } else {
      optimizer_ = std::make_unique<torch::optim::AdamW>(
          trainable, torch::optim::AdamWOptions(options_.lr).weight_decay(0.01));
    }
    return Status::Ok();
  }

  // LibTorch throws; this is where its exceptions become a Status.
  Status Train(int steps) {
    try {
      for (int i = 0; i < steps; ++i) Step();
    } catch (const std::exception& e) {
      return reel::InternalError(std::string("training step: ") + e.what());
    }
    return Status::Ok();
  }

 private:
  Trainer(torch::nn::AnyModule model, const TrainOptions& options)
      : model_(std::move(model)), options_(options) {}

  void Step() {
    const torch::Tensor x =
        torch::randn({options_.batch, 3, options_.frames, options_.size, options_.size});
    const torch::Tensor y = torch::randint(0, kClasses, {options_.batch}, torch::kLong);
    optimizer_->zero_grad();
    torch::nn::functional::cross_entropy(model_.forward(x), y).backward();
    optimizer_->step();
  }

  torch::nn::AnyModule model_;
  TrainOptions options_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

// Tensors of `b` whose bytes differ from `a`'s.
int ChangedTensors(const SafetensorsFile& a, const SafetensorsFile& b) {
  int changed = 0;
  for (const auto& [name, t] : b.tensors) {
    auto it = a.tensors.find(name);
    changed += it == a.tensors.end() || it->second.data != t.data;
  }
  return changed;
}

// ---------------------------------------------------------------------------------------------
// The peers: each stores one file per version and says how many bytes that added.

class Peer {
 public:
  virtual ~Peer() = default;
  virtual std::string name() const = 0;
  virtual Status Init() = 0;
  // Stores `file` as version `label`; returns the bytes the peer's storage grew by.
  virtual Result<uint64_t> Add(const std::string& label, const std::string& file) = 0;
  double last_seconds() const { return last_seconds_; }  // the last Add's own time

 protected:
  double last_seconds_ = 0;
};

// git-lfs keeps every version of a tracked file whole under .git/lfs/objects.
class GitLfsPeer : public Peer {
 public:
  GitLfsPeer(std::string dir, std::string log) : repo_(std::move(dir)), log_(std::move(log)) {}
  std::string name() const override { return "git-lfs"; }

  Status Init() override {
    REEL_RETURN_IF_ERROR(MakeFolder(repo_));
    return Shell(Git() + "init -q && git lfs install --local >/dev/null && " +
                     "git lfs track '*.safetensors' >/dev/null && git add .gitattributes && " +
                     Commit("init"),
                 log_)
        .status();
  }

  Result<uint64_t> Add(const std::string& label, const std::string& file) override {
    const uint64_t before = TreeBytes(repo_ + "/.git/lfs/objects");
    const Clock::time_point start = Clock::now();
    REEL_RETURN_IF_ERROR(Shell("ln -f " + reel::testing::ShellQuote(file) + " " +
                                   reel::testing::ShellQuote(repo_ + "/model.safetensors") +
                                   " && " + Git() + "add model.safetensors && " + Commit(label),
                               log_)
                             .status());
    last_seconds_ = SecondsSince(start);
    return TreeBytes(repo_ + "/.git/lfs/objects") - before;
  }

 private:
  std::string Git() const { return "cd " + reel::testing::ShellQuote(repo_) + " && git "; }
  static std::string Commit(const std::string& label) {
    return "git -c user.name=bench -c user.email=bench@localhost commit -qm " + label;
  }
  std::string repo_, log_;
};

// borg: content-defined chunks (about 2 MiB), deduplicated, each compressed with zstd level 1.
class BorgPeer : public Peer {
 public:
  BorgPeer(std::string dir, std::string log) : dir_(std::move(dir)), log_(std::move(log)) {}
  std::string name() const override { return "borg zstd,1"; }

  Status Init() override {
    REEL_RETURN_IF_ERROR(MakeFolder(dir_ + "/stage"));
    // Borg's cache and keys inside the scratch folder, not in $HOME; no prompt for a plain repo.
    ::setenv("BORG_BASE_DIR", (dir_ + "/home").c_str(), 1);
    ::setenv("BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK", "yes", 1);
    ::setenv("BORG_RELOCATED_REPO_ACCESS_IS_OK", "yes", 1);
    REEL_RETURN_IF_ERROR(Shell("borg init -e none " + Repo(), log_).status());
    REEL_ASSIGN_OR_RETURN(std::string info, Shell("borg info --json " + Repo(), log_));
    REEL_ASSIGN_OR_RETURN(unique_csize_, UniqueCsize(info));
    return Status::Ok();
  }

  // The same path every time, as a backup of a model folder would see it.
  Result<uint64_t> Add(const std::string& label, const std::string& file) override {
    const std::string stage = reel::testing::ShellQuote(dir_ + "/stage");
    REEL_ASSIGN_OR_RETURN(
        std::string out,
        Shell("ln -f " + reel::testing::ShellQuote(file) + " " + stage +
                  "/model.safetensors && cd " + stage + " && borg create --json --compression " +
                  "zstd,1 " + Repo() + "::" + label + " model.safetensors",
              log_));
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, reel::ParseJson(out, "borg create --json"));
    // borg's own duration: without the Python interpreter's start-up.
    last_seconds_ = doc.contains("archive") ? doc["archive"].value("duration", 0.0) : 0.0;
    REEL_ASSIGN_OR_RETURN(uint64_t after, UniqueCsize(out));
    const uint64_t added = after - unique_csize_;
    unique_csize_ = after;
    return added;
  }

 private:
  std::string Repo() const { return reel::testing::ShellQuote(dir_ + "/repo"); }

  // The compressed bytes of the repository's unique chunks, from `borg info|create --json`.
  static Result<uint64_t> UniqueCsize(const std::string& json) {
    REEL_ASSIGN_OR_RETURN(nlohmann::json doc, reel::ParseJson(json, "borg --json"));
    const nlohmann::json* stats = nullptr;
    if (doc.contains("cache") && doc["cache"].contains("stats")) stats = &doc["cache"]["stats"];
    if (stats == nullptr || !stats->contains("unique_csize") ||
        !stats->at("unique_csize").is_number_unsigned()) {
      return reel::InternalError("borg --json: no cache.stats.unique_csize");
    }
    return stats->at("unique_csize").get<uint64_t>();
  }

  std::string dir_, log_;
  uint64_t unique_csize_ = 0;
};

// casync: content-defined chunks (64 KiB on average), a shared store, an index per version.
class CasyncPeer : public Peer {
 public:
  CasyncPeer(std::string dir, std::string log) : dir_(std::move(dir)), log_(std::move(log)) {}
  std::string name() const override { return "casync zstd"; }

  Status Init() override { return MakeFolder(dir_ + "/store"); }

  Result<uint64_t> Add(const std::string& label, const std::string& file) override {
    const uint64_t before = TreeBytes(dir_ + "/store");
    const std::string index = dir_ + "/" + label + ".caibx";
    const Clock::time_point start = Clock::now();
    REEL_RETURN_IF_ERROR(
        Shell(
            "casync make --compression=zstd --store=" + reel::testing::ShellQuote(dir_ + "/store") +
                " " + reel::testing::ShellQuote(index) + " " + reel::testing::ShellQuote(file),
            log_)
            .status());
    last_seconds_ = SecondsSince(start);
    std::error_code ec;
    return TreeBytes(dir_ + "/store") - before + fs::file_size(index, ec);
  }

 private:
  std::string dir_, log_;
};

// ---------------------------------------------------------------------------------------------
// Reel's registry and the peers, fed the same versions.

struct VersionRow {
  std::string label, path;  // path: the version's safetensors file
  uint64_t file_bytes = 0, raw_bytes = 0;
  uint64_t reel_added = 0;  // new chunks + the version's weight manifest
  double reel_seconds = 0, reel_cpu_seconds = 0, reel_waiting_seconds = 0;
  std::map<std::string, uint64_t> peer_added;
  std::map<std::string, double> peer_seconds;
  uint64_t manifest_bytes = 0;
  VersionInfo info;
  int depth = 0;      // the depth most of its bytes are stored at (0: whole)
  int max_depth = 0;  // the deepest delta chain among its chunks: what a pull decodes at worst
};

// The chunks' delta depths, weighted by their bytes.
std::map<int, uint64_t> DepthBytes(const reel::registry::WeightManifest& m) {
  std::map<int, uint64_t> bytes;
  for (const auto& [name, t] : m.tensors) {
    for (const auto& c : t.chunks) bytes[c.depth] += c.size;
  }
  return bytes;
}

class StorageRun {
 public:
  StorageRun(std::string work, bool peers, reel::registry::WeightStoreOptions weights)
      : work_(std::move(work)), peers_on_(peers), weights_(weights) {}

  Status Init() {
    REEL_RETURN_IF_ERROR(MakeFolder(work_ + "/versions"));
    reel::registry::RegistryOptions options;
    options.weights = weights_;
    REEL_ASSIGN_OR_RETURN(registry_, Registry::Open(work_ + "/registry", options));
    if (!peers_on_) return Status::Ok();
    const std::string log = work_ + "/peers.log";
    peers_.push_back(std::make_unique<GitLfsPeer>(work_ + "/git-lfs", log));
    peers_.push_back(std::make_unique<BorgPeer>(work_ + "/borg", log));
    peers_.push_back(std::make_unique<CasyncPeer>(work_ + "/casync", log));
    for (auto& p : peers_) REEL_RETURN_IF_ERROR(p->Init());
    return Status::Ok();
  }

  // Writes the version's safetensors file, registers it in Reel (timed) and stores it in every
  // peer.
  Result<VersionRow> Add(const std::string& label, const SafetensorsFile& weights,
                         const std::string& branch, const std::vector<VersionId>& parents) {
    VersionRow row;
    row.label = label;
    row.path = work_ + "/versions/" + label + ".safetensors";
    REEL_ASSIGN_OR_RETURN(std::string bytes, reel::models::WriteSafetensors(weights));
    row.file_bytes = bytes.size();
    REEL_RETURN_IF_ERROR(WriteFile(row.path, bytes));
    // Each store starts with nothing dirty in the page cache: an fsync also waits for the data
    // that the file before it (or another tool) left unwritten.
    ::sync();
    REEL_RETURN_IF_ERROR(Register(weights, branch, parents, &row));
    for (auto& p : peers_) {
      ::sync();
      REEL_ASSIGN_OR_RETURN(row.peer_added[p->name()], p->Add(label, row.path));
      row.peer_seconds[p->name()] = p->last_seconds();
    }
    Progress(label + ": file " + FormatBytes(row.file_bytes) + ", Reel added " +
             FormatBytes(row.reel_added) + " in " + std::to_string(row.reel_seconds).substr(0, 5) +
             " s (delta depth " + std::to_string(row.depth) + ", max " +
             std::to_string(row.max_depth) + ")");
    return row;
  }

  Registry& registry() { return *registry_; }
  std::vector<std::string> peer_names() const {
    std::vector<std::string> names;
    for (const auto& p : peers_) names.push_back(p->name());
    return names;
  }

 private:
  Status Register(const SafetensorsFile& weights, const std::string& branch,
                  const std::vector<VersionId>& parents, VersionRow* row) {
    reel::registry::NewVersion nv;
    nv.model = kModel;
    nv.branch = branch;
    nv.weights = weights;  // copied before the clock starts: the caller's file stays intact
    nv.parents = parents;
    nv.architecture = {{"name", "r2plus1d_18"}, {"num_classes", kClasses}};
    nv.message = row->label;
    reel::registry::PushStats stats;
    const ThreadTimes before = ThreadSchedTimes();
    const Clock::time_point start = Clock::now();
    REEL_ASSIGN_OR_RETURN(row->info,
                          registry_->Register(nv, reel::registry::Actor::Local(), &stats));
    row->reel_seconds = SecondsSince(start);
    const ThreadTimes after = ThreadSchedTimes();
    row->reel_cpu_seconds = after.cpu - before.cpu;
    row->reel_waiting_seconds = after.waiting - before.waiting;
    row->raw_bytes = stats.raw_bytes;
    // What the version added: its new chunks, and its manifest in the registry's database.
    row->manifest_bytes = reel::registry::ManifestToJson(row->info.weights).size();
    row->reel_added = row->info.stored_bytes + row->manifest_bytes;
    const std::map<int, uint64_t> depths = DepthBytes(row->info.weights);
    row->max_depth = depths.empty() ? 0 : depths.rbegin()->first;
    for (const auto& [depth, bytes] : depths) {
      if (bytes > depths.at(row->depth)) row->depth = depth;
    }
    return Status::Ok();
  }

  std::string work_;
  bool peers_on_;
  reel::registry::WeightStoreOptions weights_;
  std::unique_ptr<Registry> registry_;
  std::vector<std::unique_ptr<Peer>> peers_;
};

struct Scenarios {
  VersionRow base;
  std::vector<VersionRow> run;  // (a)
  VersionRow head, full;        // (b), (c)
  SafetensorsFile base_weights, full_weights;
  int head_changed_tensors = 0, full_changed_tensors = 0, tensors = 0;
  double train_seconds = 0;
};

// Trains one step phase, timing it into *seconds.
Status TrainTimed(Trainer& trainer, int steps, double* seconds) {
  const Clock::time_point start = Clock::now();
  REEL_RETURN_IF_ERROR(trainer.Train(steps));
  *seconds += SecondsSince(start);
  return Status::Ok();
}

Result<Scenarios> RunScenarios(const Args& args, StorageRun& storage) {
  Scenarios s;
  TrainOptions t{args.batch, args.frames, args.size, args.optimizer, args.lr};
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(t));
  s.base_weights = trainer->Weights();
  s.tensors = static_cast<int>(s.base_weights.tensors.size());
  REEL_ASSIGN_OR_RETURN(s.base, storage.Add("base", s.base_weights, "main", {}));

  // (a) One run from the base, a checkpoint every args.steps optimizer steps.
  REEL_RETURN_IF_ERROR(trainer->Restart(s.base_weights, false));
  VersionId parent = s.base.info.id;
  for (int k = 1; k <= args.checkpoints; ++k) {
    REEL_RETURN_IF_ERROR(TrainTimed(*trainer, args.steps, &s.train_seconds));
    REEL_ASSIGN_OR_RETURN(VersionRow row, storage.Add("run-" + std::to_string(k),
                                                      trainer->Weights(), "run", {parent}));
    parent = row.info.id;
    s.run.push_back(std::move(row));
  }

  // (b) Head only, (c) every weight: both fine-tunes of the base.
  REEL_RETURN_IF_ERROR(trainer->Restart(s.base_weights, true));
  REEL_RETURN_IF_ERROR(TrainTimed(*trainer, args.finetune_steps, &s.train_seconds));
  SafetensorsFile head = trainer->Weights();
  s.head_changed_tensors = ChangedTensors(s.base_weights, head);
  REEL_ASSIGN_OR_RETURN(s.head, storage.Add("head-only", head, "head-only", {s.base.info.id}));

  REEL_RETURN_IF_ERROR(trainer->Restart(s.base_weights, false));
  REEL_RETURN_IF_ERROR(TrainTimed(*trainer, args.finetune_steps, &s.train_seconds));
  s.full_weights = trainer->Weights();
  s.full_changed_tensors = ChangedTensors(s.base_weights, s.full_weights);
  REEL_ASSIGN_OR_RETURN(s.full, storage.Add("full", s.full_weights, "full", {s.base.info.id}));
  return s;
}

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
      "\n  a depth-0 checkpoint is stored whole: the chain reached max_chain deltas, so that "
      "every pull decodes a bounded chain\n");
  std::printf("each version's weight manifest (in the registry's database, counted above): %s\n",
              FormatBytes(s.base.manifest_bytes).c_str());
  std::printf("tensors changed: head-only %d of %d (fc.weight, fc.bias), full fine-tune %d of %d\n",
              s.head_changed_tensors, s.tensors, s.full_changed_tensors, s.tensors);
}

// ---------------------------------------------------------------------------------------------
// Throughput.

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

// The pull of `row`'s version into a safetensors file (fsynced, as `reel storage cp` writes),
// checked bit for bit against the file registered, against `reel storage cp` of that file.
Result<std::pair<double, double>> PullAndCopySeconds(Registry& registry, const VersionRow& row,
                                                     const std::string& work,
                                                     const std::string& reel_cli, int repeat) {
  REEL_ASSIGN_OR_RETURN(std::string expected, ReadFile(row.path));
  REEL_ASSIGN_OR_RETURN(auto out, reel::storage::LocalStore::Open(work + "/pulled"));
  const std::string cp = reel::testing::ShellQuote(reel_cli) + " storage cp -q " +
                         reel::testing::ShellQuote(row.path) + " " +
                         reel::testing::ShellQuote(work + "/copied/" + row.label + ".safetensors");
  std::vector<double> pulls, copies;
  for (int i = 0; i < repeat; ++i) {  // alternating, so both see the same page cache and disk
    ::sync();
    Clock::time_point start = Clock::now();
    REEL_ASSIGN_OR_RETURN(VersionInfo v, registry.Get(row.info.id.ToString()));
    REEL_ASSIGN_OR_RETURN(SafetensorsFile file, registry.PullWeights(v));
    REEL_ASSIGN_OR_RETURN(std::string bytes, reel::models::WriteSafetensors(file));
    REEL_RETURN_IF_ERROR(out->Put(row.label + ".safetensors", bytes));
    pulls.push_back(SecondsSince(start));
    if (bytes != expected) return reel::DataLossError(row.label + ": the pull differs");
    ::sync();
    start = Clock::now();
    REEL_RETURN_IF_ERROR(Shell(cp, work + "/peers.log").status());
    copies.push_back(SecondsSince(start));
  }
  return std::make_pair(Median(pulls), Median(copies));
}

// The version most of whose bytes sit deepest in delta chains: the slowest to pull.
const VersionRow& DeepestVersion(const Scenarios& s) {
  const VersionRow* deepest = &s.base;
  for (const VersionRow* r : {&s.head, &s.full}) deepest = r->depth > deepest->depth ? r : deepest;
  for (const VersionRow& r : s.run) deepest = r.depth > deepest->depth ? &r : deepest;
  return *deepest;
}

// MB/s of the push of `changed` after `parent` into an in-memory store: the codec's own speed
// (SHA-256, the parent's chunks read back and decoded, XOR, planes, zstd) without the disk.
Result<double> InMemoryPushMBps(const SafetensorsFile& parent, const SafetensorsFile& changed,
                                int repeat) {
  std::vector<double> times;
  uint64_t raw = 0;
  for (int i = 0; i < repeat; ++i) {
    reel::registry::WeightStore store(std::make_shared<reel::storage::MemoryStore>("bench"), "");
    REEL_ASSIGN_OR_RETURN(reel::registry::WeightManifest base, store.Push(parent, nullptr));
    reel::registry::PushStats stats;
    const Clock::time_point start = Clock::now();
    REEL_RETURN_IF_ERROR(store.Push(changed, &base, &stats).status());
    times.push_back(SecondsSince(start));
    raw = stats.raw_bytes;
  }
  return raw / 1e6 / Median(times);
}

// Median seconds of the push of `changed` after `parent` into a local folder with compression off
// (chunks stored as they are, fsynced), and of `reel storage cp` of `changed_path`: what the
// registry's content addressing costs beside a plain copy.
Result<std::pair<double, double>> UncompressedPushAndCopySeconds(
    const SafetensorsFile& parent, const SafetensorsFile& changed, const std::string& changed_path,
    const std::string& work, const std::string& reel_cli, int repeat) {
  reel::registry::WeightStoreOptions off;
  off.compress = false;
  const std::string cp = reel::testing::ShellQuote(reel_cli) + " storage cp -q " +
                         reel::testing::ShellQuote(changed_path) + " " +
                         reel::testing::ShellQuote(work + "/copied/uncompressed.safetensors");
  std::vector<double> pushes, copies;
  for (int i = 0; i < repeat; ++i) {
    const std::string folder = work + "/uncompressed-" + std::to_string(i);
    REEL_ASSIGN_OR_RETURN(auto local, reel::storage::LocalStore::Open(folder));
    reel::registry::WeightStore store(std::move(local), "", off);
    REEL_ASSIGN_OR_RETURN(reel::registry::WeightManifest base, store.Push(parent, nullptr));
    ::sync();
    Clock::time_point start = Clock::now();
    REEL_RETURN_IF_ERROR(store.Push(changed, &base).status());
    pushes.push_back(SecondsSince(start));
    ::sync();
    start = Clock::now();
    REEL_RETURN_IF_ERROR(Shell(cp, work + "/peers.log").status());
    copies.push_back(SecondsSince(start));
    std::filesystem::remove_all(folder);
  }
  return std::make_pair(Median(pushes), Median(copies));
}

// Median wall and CPU MB/s of the pushes of `rows`, and borg's median MB/s on the same files.
struct PushFigures {
  double wall_mbps = 0, cpu_mbps = 0, borg_mbps = 0;
  double cpu_share = 0, waiting_share = 0;  // of the pushes' wall time; the rest: blocked (I/O)
};

PushFigures PushOf(const std::vector<const VersionRow*>& rows) {
  std::vector<double> wall, cpu, borg;
  double wall_s = 0, cpu_s = 0, waiting_s = 0;
  for (const VersionRow* r : rows) {
    wall_s += r->reel_seconds;
    cpu_s += r->reel_cpu_seconds;
    waiting_s += r->reel_waiting_seconds;
    wall.push_back(r->raw_bytes / 1e6 / r->reel_seconds);
    cpu.push_back(r->raw_bytes / 1e6 / std::max(1e-9, r->reel_cpu_seconds));
    if (auto it = r->peer_seconds.find("borg zstd,1");
        it != r->peer_seconds.end() && it->second > 0)
      borg.push_back(r->file_bytes / 1e6 / it->second);
  }
  return {Median(wall), Median(cpu), Median(borg), cpu_s / wall_s, waiting_s / wall_s};
}

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
  const PushFigures a = PushOf(run), c = PushOf({&s.full});
  for (const auto& [name, p] : {std::make_pair("push, (a) run checkpoint (median)", a),
                                std::make_pair("push, (c) full fine-tune", c)}) {
    Figure f =
        MakeFigure(section, std::string(name) + ", wall", p.wall_mbps, "MB/s", Goal::kAtLeast, 250);
    f.peer_name = p.borg_mbps > 0 ? "borg create" : "";
    f.peer = p.borg_mbps;
    char note[160];
    std::snprintf(note, sizeof note,
                  "1 thread, %s MB per CPU-second; wall: %.0f%% on a CPU, %.0f%% waiting for one, "
                  "%.0f%% blocked (fsync, reads)",
                  Number(p.cpu_mbps).c_str(), 100 * p.cpu_share, 100 * p.waiting_share,
                  100 * (1 - p.cpu_share - p.waiting_share));
    f.note = note;
    figures->push_back(f);
  }

  Progress("push into memory");
  REEL_ASSIGN_OR_RETURN(const double in_memory,
                        InMemoryPushMBps(s.base_weights, s.full_weights, args.repeat));
  Figure memory = MakeFigure(section, "push, (c) full fine-tune, into memory", in_memory, "MB/s",
                             Goal::kAtLeast, 250);
  memory.peer_name = c.borg_mbps > 0 ? "borg create" : "";
  memory.peer = c.borg_mbps;
  memory.note = "1 thread; the codec alone: no disk, no database";
  figures->push_back(memory);

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
  off.note = "chunks stored as they are, each fsynced; no database";
  figures->push_back(off);

  std::vector<const VersionRow*> pulled = {&DeepestVersion(s)};
  if (pulled.front() != &s.base) pulled.push_back(&s.base);
  for (const VersionRow* r : pulled) {
    Progress("pull of " + r->label + " against reel storage cp");
    REEL_ASSIGN_OR_RETURN(auto times,
                          PullAndCopySeconds(storage.registry(), *r, work, reel_cli, args.repeat));
    const double pull = r->file_bytes / 1e6 / times.first, cp = r->file_bytes / 1e6 / times.second;
    Figure f = MakeFigure(
        section, "pull " + r->label + ", delta depth " + std::to_string(r->depth) + ", to a file",
        pull, "MB/s", Goal::kAtLeast, 0.8 * cp);
    f.peer_name = "reel storage cp";
    f.peer = cp;
    figures->push_back(f);
  }
  return Status::Ok();
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

// `n` versions of one model (one small tensor each, with metrics and a tag, as a run's
// registrations carry) and an alias at the middle one.
Status FillRegistry(Registry& registry, int n) {
  reel::registry::NewVersion nv;
  nv.model = "listing";
  nv.architecture = {{"name", "r2plus1d"}, {"num_classes", 8}};
  nv.weights.tensors["fc.bias"] = {"F32", {8}, std::string(32, '\0')};
  const reel::registry::Actor who = reel::registry::Actor::Local();
  for (int i = 1; i <= n; ++i) {
    nv.metrics = {{"top1", (i % 1000) / 1000.0}};
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

Status AddListingFigures(const Args& args, const std::string& work, std::vector<Figure>* figures) {
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<Registry> registry, OpenScratchRegistry(work + "/listing"));
  const Clock::time_point start = Clock::now();
  REEL_RETURN_IF_ERROR(FillRegistry(*registry, args.list_versions));
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
    Figure f = MakeFigure("listing and search, " + n + " versions in one model", name + ", median",
                          l.median_ms, "ms", Goal::kAtMost, 50);
    char note[96];
    std::snprintf(note, sizeof note, "max %.3g ms of %d runs", l.max_ms, args.list_repeat);
    f.note = note;
    figures->push_back(f);
  }
  Progress("filled the listing registry in " + std::to_string(fill_s).substr(0, 5) + " s");
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
      "registry push: 1 thread, pull: %s; load average %s at the start, %s at the end\n",
      m.cpu.c_str(), m.cores, m.torch_threads, m.omp_wait_policy.c_str(),
      args.pull_threads > 0 ? (std::to_string(args.pull_threads) + " threads").c_str()
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

Status Run(const Args& args) {
  const Machine machine = DescribeMachine(args.threads);
  torch::set_num_threads(machine.torch_threads);
  torch::manual_seed(1);
  REEL_ASSIGN_OR_RETURN(const std::string work, MakeWorkFolder(args.work));
  const std::string reel_cli = FindReelCli(args.reel);
  if (!fs::exists(reel_cli)) return reel::NotFoundError("no reel CLI at " + reel_cli + " (--reel)");
  Progress("scratch folder " + work);

  reel::registry::WeightStoreOptions weights;
  weights.max_chain = args.max_chain;
  weights.threads = args.pull_threads;
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
  REEL_RETURN_IF_ERROR(AddListingFigures(args, work, &figures));

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
  if (!args.json.empty()) REEL_RETURN_IF_ERROR(WriteJson(figures, args.json));
  if (!args.keep && args.work.empty()) {
    Progress("removing " + work);
    std::error_code ec;
    fs::remove_all(work, ec);
  }
  Progress("done");
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
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
