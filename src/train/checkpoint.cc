#include "train/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "base/hash.h"
#include "base/json.h"
#include "base/logging.h"
#include "base/strings.h"
#include "storage/open.h"

namespace reel::train {

CheckpointStore::CheckpointStore(std::shared_ptr<storage::ObjectStore> store, std::string prefix)
    : store_(std::move(store)), prefix_(std::move(prefix)) {
  if (!prefix_.empty() && prefix_.back() != '/') prefix_ += '/';
}

Result<CheckpointStore> CheckpointStore::Open(const std::string& uri) {
  REEL_ASSIGN_OR_RETURN(auto store, storage::OpenStore(uri));
  return CheckpointStore(std::shared_ptr<storage::ObjectStore>(std::move(store)));
}

std::string CheckpointStore::DirName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%010lld", static_cast<long long>(step));
  return name;
}

std::string CheckpointStore::Key(const std::string& relative) const { return prefix_ + relative; }

// xxh3-64 in hex: fast enough to check every load, and no crypto needed against bit rot.
std::string CheckpointStore::Checksum(std::string_view bytes) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(Xxh3_64(bytes)));
  return hex;
}

// The folder's checksums.json as {file: hex}; empty for checkpoints written before it existed.
Result<CheckpointStore::Checksums> CheckpointStore::LoadChecksums(const std::string& dir) {
  const std::string key = Key(dir + "checksums.json");
  auto text = store_->Get(key);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return Checksums{};
    return text.status();
  }
  const std::string where = storage::ObjectUri(*store_, key);
  REEL_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(*text, where));
  if (!doc.is_object()) return DataLossError(where + ": expected an object of checksums");
  Checksums checksums;
  for (const auto& [name, value] : doc.items()) {
    if (!value.is_string()) return DataLossError(where + ": " + name + ": expected a string");
    checksums[name] = value.get<std::string>();
  }
  return checksums;
}

Status CheckpointStore::Verify(const Checksums& checksums, const std::string& relative,
                               std::string_view bytes) const {
  const std::string name = relative.substr(relative.rfind('/') + 1);
  auto it = checksums.find(name);
  if (it == checksums.end()) return Status::Ok();  // an older checkpoint has none
  const std::string actual = Checksum(bytes);
  if (actual == it->second) return Status::Ok();
  return DataLossError("checkpoint file " + storage::ObjectUri(*store_, Key(relative)) +
                       " is corrupt or truncated: its xxh3 is " + actual +
                       ", checksums.json says " + it->second + " (" + std::to_string(bytes.size()) +
                       " bytes)");
}

std::string CheckpointStore::uri() const { return storage::ObjectUri(*store_, prefix_); }

Status CheckpointStore::Save(const CheckpointData& checkpoint, int keep) {
  const std::string dir = DirName(checkpoint.step) + "/";
  REEL_ASSIGN_OR_RETURN(std::string model, models::WriteSafetensors(checkpoint.model));
  REEL_ASSIGN_OR_RETURN(std::string state, models::WriteSafetensors(checkpoint.state));
  const nlohmann::json checksums = {{"model.safetensors", Checksum(model)},
                                    {"state.safetensors", Checksum(state)},
                                    {"config.yaml", Checksum(checkpoint.config_text)}};
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "state.safetensors"), state));
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "config.yaml"), checkpoint.config_text));
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "checksums.json"), checksums.dump(2) + "\n"));
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "model.safetensors"), model));
  REEL_RETURN_IF_ERROR(PutLatest(checkpoint.step));
  return Prune(checkpoint.step, keep);
}

std::string CheckpointStore::ShardName(int shard, int shards, const std::string& file) {
  char name[48];
  std::snprintf(name, sizeof(name), "shard-%05d-of-%05d.", shard, shards);
  return name + file;
}

Status CheckpointStore::SaveShard(int64_t step, int shard, int shards,
                                  const models::SafetensorsFile& model,
                                  const models::SafetensorsFile& state) {
  const std::string dir = DirName(step) + "/";
  REEL_ASSIGN_OR_RETURN(std::string model_bytes, models::WriteSafetensors(model));
  REEL_ASSIGN_OR_RETURN(std::string state_bytes, models::WriteSafetensors(state));
  const std::string model_name = ShardName(shard, shards, "model.safetensors");
  const std::string state_name = ShardName(shard, shards, "state.safetensors");
  const nlohmann::json checksums = {{model_name, Checksum(model_bytes)},
                                    {state_name, Checksum(state_bytes)}};
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + model_name), model_bytes));
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + state_name), state_bytes));
  // Last: its presence says the shard is whole.
  return store_->Put(Key(dir + ShardName(shard, shards, "checksums.json")),
                     checksums.dump(2) + "\n");
}

Status CheckpointStore::CommitShards(const CheckpointData& rest, int shards, int keep) {
  const std::string dir = DirName(rest.step) + "/";
  REEL_ASSIGN_OR_RETURN(std::string state, models::WriteSafetensors(rest.state));
  nlohmann::json checksums = {{"state.safetensors", Checksum(state)},
                              {"config.yaml", Checksum(rest.config_text)}};
  nlohmann::json files = nlohmann::json::array();
  for (int i = 0; i < shards; ++i) {
    const std::string name = ShardName(i, shards, "checksums.json");
    auto text = store_->Get(Key(dir + name));
    if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
      return DataLossError("sharded checkpoint " + storage::ObjectUri(*store_, Key(dir)) +
                           " lacks shard " + std::to_string(i) + " of " + std::to_string(shards) +
                           " (" + name + ")");
    }
    REEL_RETURN_IF_ERROR(text.status());
    const std::string where = storage::ObjectUri(*store_, Key(dir + name));
    REEL_ASSIGN_OR_RETURN(nlohmann::json shard, ParseJson(*text, where));
    if (!shard.is_object()) return DataLossError(where + ": expected an object of checksums");
    for (const auto& [file, sum] : shard.items()) {
      checksums[file] = sum;
      files.push_back(file);
    }
  }
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "state.safetensors"), state));
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "config.yaml"), rest.config_text));
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "checksums.json"), checksums.dump(2) + "\n"));
  const nlohmann::json manifest = {{"shards", shards}, {"files", files}};
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "manifest.json"), manifest.dump(2) + "\n"));
  REEL_RETURN_IF_ERROR(PutLatest(rest.step));
  return Prune(rest.step, keep);
}

Status CheckpointStore::PutLatest(int64_t step) {
  const nlohmann::json latest = {{"step", step}, {"dir", DirName(step)}};
  return store_->Put(Key("latest"), latest.dump() + "\n");
}

namespace {

// The object whose presence makes a folder a checkpoint.
bool IsMarker(const std::string& key) {
  return EndsWith(key, "/model.safetensors") || EndsWith(key, "/manifest.json");
}

}  // namespace

Status CheckpointStore::Prune(int64_t saved_step, int keep) {
  REEL_ASSIGN_OR_RETURN(std::vector<int64_t> steps, Steps());
  if (static_cast<int>(steps.size()) <= keep) return Status::Ok();
  for (size_t i = 0; i + keep < steps.size(); ++i) {
    if (steps[i] == saved_step) continue;
    REEL_ASSIGN_OR_RETURN(auto objects, storage::ListAll(*store_, Key(DirName(steps[i]) + "/")));
    // The folder's marker goes last so a half-deleted folder is never listed.
    std::stable_partition(objects.begin(), objects.end(),
                          [](const storage::ObjectInfo& o) { return !IsMarker(o.key); });
    for (const auto& o : objects) REEL_RETURN_IF_ERROR(store_->Delete(o.key));
  }
  return Status::Ok();
}

Result<std::optional<int64_t>> CheckpointStore::LatestStep() {
  auto text = store_->Get(Key("latest"));
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::optional<int64_t>();
    return text.status();
  }
  const std::string where = storage::ObjectUri(*store_, Key("latest"));
  auto json = ParseJson(*text, where);
  if (!json.ok()) return DataLossError(where + " is not a checkpoint pointer: not valid JSON");
  JsonFields fields(*json, "");
  const int64_t step = fields.Int("step");
  if (!fields.ok() || step < 0) {
    return DataLossError(where + " is not a checkpoint pointer" +
                         (fields.ok() ? ": negative step" : ": " + fields.error()));
  }
  return std::optional<int64_t>(step);
}

Result<std::vector<int64_t>> CheckpointStore::Steps() {
  REEL_ASSIGN_OR_RETURN(auto objects, storage::ListAll(*store_, Key("step-")));
  std::vector<int64_t> steps;
  for (const auto& o : objects) {
    std::string rest = o.key.substr(prefix_.size());
    long long step = 0;
    char file[64] = {0};
    if (std::sscanf(rest.c_str(), "step-%lld/%63s", &step, file) == 2 &&
        IsMarker("/" + std::string(file))) {
      steps.push_back(step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Result<std::string> CheckpointStore::GetVerified(const std::string& dir, const std::string& name,
                                                 const Checksums& checksums) {
  auto bytes = store_->Get(Key(dir + name));
  if (!bytes.ok() && bytes.status().code() == StatusCode::kNotFound) {
    return DataLossError("checkpoint " + storage::ObjectUri(*store_, Key(dir)) + " lacks " + name);
  }
  REEL_RETURN_IF_ERROR(bytes.status());
  REEL_RETURN_IF_ERROR(Verify(checksums, dir + name, *bytes));
  return bytes;
}

Status CheckpointStore::ReadInto(const std::string& dir, const std::string& name,
                                 const Checksums& checksums, models::SafetensorsFile* into) {
  REEL_ASSIGN_OR_RETURN(std::string bytes, GetVerified(dir, name, checksums));
  const std::string where = storage::ObjectUri(*store_, Key(dir + name));
  REEL_ASSIGN_OR_RETURN(models::SafetensorsFile file, models::ReadSafetensors(bytes, where));
  for (auto& [tensor, value] : file.tensors) {
    if (into->tensors.count(tensor)) {
      return DataLossError(where + ": tensor '" + tensor + "' is in another shard too");
    }
    into->tensors[tensor] = std::move(value);
  }
  for (auto& [key, value] : file.metadata) into->metadata[key] = std::move(value);
  return Status::Ok();
}

Result<int> CheckpointStore::ShardCount(const std::string& dir) {
  auto text = store_->Get(Key(dir + "manifest.json"));
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) return 0;
  REEL_RETURN_IF_ERROR(text.status());
  const std::string where = storage::ObjectUri(*store_, Key(dir + "manifest.json"));
  REEL_ASSIGN_OR_RETURN(nlohmann::json manifest, ParseJson(*text, where));
  JsonFields fields(manifest, "");
  const int64_t shards = fields.Int("shards");
  if (!fields.ok() || shards < 1 || shards > 1 << 20) {
    return DataLossError(where + " is not a checkpoint manifest" +
                         (fields.ok() ? ": bad shard count" : ": " + fields.error()));
  }
  return static_cast<int>(shards);
}

Result<CheckpointData> CheckpointStore::Load(std::optional<int64_t> step) {
  if (!step) {
    REEL_ASSIGN_OR_RETURN(step, LatestStep());
    if (!step) return NotFoundError("no checkpoint at " + uri());
  }
  const std::string dir = DirName(*step) + "/";
  REEL_ASSIGN_OR_RETURN(Checksums checksums, LoadChecksums(dir));
  REEL_ASSIGN_OR_RETURN(int shards, ShardCount(dir));
  CheckpointData data;
  data.step = *step;
  if (shards == 0) REEL_RETURN_IF_ERROR(ReadInto(dir, "model.safetensors", checksums, &data.model));
  for (int i = 0; i < shards; ++i) {
    REEL_RETURN_IF_ERROR(
        ReadInto(dir, ShardName(i, shards, "model.safetensors"), checksums, &data.model));
    REEL_RETURN_IF_ERROR(
        ReadInto(dir, ShardName(i, shards, "state.safetensors"), checksums, &data.state));
  }
  REEL_RETURN_IF_ERROR(ReadInto(dir, "state.safetensors", checksums, &data.state));
  REEL_ASSIGN_OR_RETURN(data.config_text, GetVerified(dir, "config.yaml", checksums));
  return data;
}

}  // namespace reel::train
