// registry_bench's versions of R(2+1)D-18: stored in Reel's registry and by the peers, with
// the scenarios that train them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "bench/registry_bench_util.h"
#include "models/safetensors.h"
#include "registry/registry.h"
#include "registry/weight_store.h"

namespace reel::registry_bench {

using reel::models::SafetensorsFile;
using reel::registry::Registry;
using reel::registry::VersionId;
using reel::registry::VersionInfo;

constexpr int kClasses = 400;  // torchvision's Kinetics-400 head: the 126 MB the issue measures

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

// ---------------------------------------------------------------------------------------------
// Reel's registry and the peers, fed the same versions.

struct VersionRow {
  std::string label, path;  // path: the version's safetensors file
  uint64_t file_bytes = 0, raw_bytes = 0;
  uint64_t reel_added = 0;  // new chunks + the version's weight manifest
  double reel_seconds = 0, reel_cpu_seconds = 0;
  std::map<std::string, uint64_t> peer_added;
  std::map<std::string, double> peer_seconds;
  uint64_t manifest_bytes = 0;
  VersionInfo info;
  int depth = 0;      // the depth most of its bytes are stored at (0: whole)
  int max_depth = 0;  // the deepest delta chain among its chunks: what a pull decodes at worst
};

class StorageRun {
 public:
  StorageRun(std::string work, bool peers, reel::registry::WeightStoreOptions weights)
      : work_(std::move(work)), peers_on_(peers), weights_(weights) {}

  Status Init();

  // Writes the version's safetensors file, registers it in Reel (timed) and stores it in every
  // peer.
  Result<VersionRow> Add(const std::string& label, const SafetensorsFile& weights,
                         const std::string& branch, const std::vector<VersionId>& parents);

  Registry& registry() { return *registry_; }
  // The registry as another process opens it: without the cache of the pushes made here.
  Result<std::unique_ptr<Registry>> OpenUncached() const;
  // Registers `row`'s weights again, as a version of their own on `branch`: nothing new is
  // stored, and registry()'s cache holds their chunks as after the push that first stored them
  // (the version a run has just registered).
  Status RegisterAgain(const VersionRow& row, const std::string& branch);
  std::vector<std::string> peer_names() const {
    std::vector<std::string> names;
    for (const auto& p : peers_) names.push_back(p->name());
    return names;
  }

 private:
  Status Register(const SafetensorsFile& weights, const std::string& branch,
                  const std::vector<VersionId>& parents, VersionRow* row);

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

Result<Scenarios> RunScenarios(const Args& args, StorageRun& storage);

// R(2+1)D-18's weights as built, untrained: the tensor names and shapes the listing uses.
Result<reel::models::SafetensorsFile> UntrainedWeights();

// Throughput (registry_bench_speed.cc): hash and split, push and pull, beside their peers.
Status AddThroughputFigures(const Args& args, const std::string& work, const std::string& reel_cli,
                            Scenarios& s, StorageRun& storage, std::vector<Figure>* figures);

}  // namespace reel::registry_bench
