// Training checkpoints on any ObjectStore:
//   <uri>/step-0000000100/model.safetensors   parameters and buffers (torchvision names)
//   <uri>/step-0000000100/state.safetensors   optimiser state and RNG state as tensors; the
//                                             trainer's JSON (step, loader state, loss scaler,
//                                             schedule, config) in its metadata under "trainer"
//   <uri>/step-0000000100/config.yaml         the run's config, for people
//   <uri>/step-0000000100/checksums.json      {"model.safetensors": "<xxh3-64 hex>", ...}
//   <uri>/latest                              {"step": 100, "dir": "step-0000000100"}
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
  std::shared_ptr<storage::ObjectStore> store_;
  std::string prefix_;  // "" or "a/b/" within the store
};

}  // namespace reel::train
