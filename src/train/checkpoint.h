// Training checkpoints on any ObjectStore:
//   <uri>/step-0000000100/model.safetensors   parameters and buffers (torchvision names)
//   <uri>/step-0000000100/state.safetensors   optimiser state and RNG state as tensors; the
//                                             trainer's JSON (step, loader state, loss scaler,
//                                             schedule, config) in its metadata under "trainer"
//   <uri>/step-0000000100/config.yaml         the run's config, for people
//   <uri>/step-0000000100/checksums.json      {"model.safetensors": "<xxh3-64 hex>", ...}
//   <uri>/latest                              {"step": 100, "dir": "step-0000000100"}
// A sharded checkpoint (a pipeline's stages each hold part of the model and optimiser state, and
// write it in parallel) has instead of model.safetensors:
//   <uri>/step-0000000100/shard-00001-of-00002.model.safetensors   that shard's tensors
//   <uri>/step-0000000100/shard-00001-of-00002.state.safetensors   its optimiser state
//   <uri>/step-0000000100/shard-00001-of-00002.checksums.json      its files' checksums
//   <uri>/step-0000000100/manifest.json        {"shards": 2, "files": [...]}: written last, after
//                                              every shard, it marks the folder as a checkpoint
// and Load merges the shards into one CheckpointData, so a checkpoint loads into any layout.
// Every object is put atomically (the stores' contract); model.safetensors, which marks a
// folder as a checkpoint, is written after the rest of its folder and `latest` after that, so a
// crash mid-save leaves the previous checkpoint current. After a save, all but the newest `keep`
// checkpoints are deleted. Load verifies every file against checksums.json (checkpoints of
// releases before it have none and load unverified).
// Errors: the store's; DataLoss for a `latest` that is malformed or names missing objects, and
// for a file that is truncated, corrupt or fails its checksum; NotFound from Load when no
// checkpoint exists.
// Thread-safety: one writer per URI at a time; readers may run alongside.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "models/safetensors.h"
#include "storage/object_store.h"

namespace reel::train {

struct CheckpointData {
  int64_t step = 0;
  models::SafetensorsFile model;
  models::SafetensorsFile state;  // its metadata["trainer"] holds the trainer's JSON
  std::string config_text;
};

class CheckpointStore {
 public:
  // `uri`: any store URI (local folder, file://, s3://bucket/prefix).
  static Result<CheckpointStore> Open(const std::string& uri);
  explicit CheckpointStore(std::shared_ptr<storage::ObjectStore> store, std::string prefix = "");

  Status Save(const CheckpointData& checkpoint, int keep);
  // A sharded save: every shard's writer calls SaveShard (in parallel); once all have, one
  // calls CommitShards with the rest (state without the shards' tensors, config), which checks
  // that every shard is there (DataLoss naming the first missing one) before its manifest.
  Status SaveShard(int64_t step, int shard, int shards, const models::SafetensorsFile& model,
                   const models::SafetensorsFile& state);
  Status CommitShards(const CheckpointData& rest, int shards, int keep);
  // The step `latest` names, or nullopt when there is no checkpoint.
  Result<std::optional<int64_t>> LatestStep();
  // Steps of every complete checkpoint folder, ascending.
  Result<std::vector<int64_t>> Steps();
  // A checkpoint by step, or the latest when `step` is empty (NotFound when there is none).
  Result<CheckpointData> Load(std::optional<int64_t> step = std::nullopt);

  std::string uri() const;
  static std::string DirName(int64_t step);
  // Checkpoints kept apart under `name`/ (e.g. the run's best), on the same store.
  CheckpointStore Sub(const std::string& name) const {
    return CheckpointStore(store_, prefix_ + name + "/");
  }

 private:
  using Checksums = std::map<std::string, std::string>;  // file name -> xxh3-64 hex
  static std::string Checksum(std::string_view bytes);
  Result<Checksums> LoadChecksums(const std::string& dir);
  Status Verify(const Checksums& checksums, const std::string& relative,
                std::string_view bytes) const;
  std::string Key(const std::string& relative) const;
  static std::string ShardName(int shard, int shards, const std::string& file);
  Status PutLatest(int64_t step);
  Status Prune(int64_t saved_step, int keep);      // all but the newest `keep` (and saved_step)
  Result<int> ShardCount(const std::string& dir);  // 0: not sharded
  Result<std::string> GetVerified(const std::string& dir, const std::string& name,
                                  const Checksums& checksums);
  // Adds the tensors of safetensors file dir+name to `into` (DataLoss on a name seen before).
  Status ReadInto(const std::string& dir, const std::string& name, const Checksums& checksums,
                  models::SafetensorsFile* into);
  std::shared_ptr<storage::ObjectStore> store_;
  std::string prefix_;  // "" or "a/b/" within the store
};

}  // namespace reel::train
