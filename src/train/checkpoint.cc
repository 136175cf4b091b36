#include "train/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "base/hash.h"
#include "base/json.h"
#include "base/logging.h"
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
  nlohmann::json latest = {{"step", checkpoint.step}, {"dir", DirName(checkpoint.step)}};
  REEL_RETURN_IF_ERROR(store_->Put(Key("latest"), latest.dump() + "\n"));

  REEL_ASSIGN_OR_RETURN(std::vector<int64_t> steps, Steps());
  if (static_cast<int>(steps.size()) > keep) {
    for (size_t i = 0; i + keep < steps.size(); ++i) {
      if (steps[i] == checkpoint.step) continue;
      REEL_ASSIGN_OR_RETURN(auto objects, storage::ListAll(*store_, Key(DirName(steps[i]) + "/")));
      // The folder's marker (model.safetensors) goes last so a half-deleted folder is never listed.
      std::stable_partition(objects.begin(), objects.end(), [](const storage::ObjectInfo& o) {
        return o.key.size() < 17 || o.key.compare(o.key.size() - 17, 17, "model.safetensors") != 0;
      });
      for (const auto& o : objects) REEL_RETURN_IF_ERROR(store_->Delete(o.key));
    }
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
        std::string(file) == "model.safetensors") {
      steps.push_back(step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Result<CheckpointData> CheckpointStore::Load(std::optional<int64_t> step) {
  if (!step) {
    REEL_ASSIGN_OR_RETURN(step, LatestStep());
    if (!step) return NotFoundError("no checkpoint at " + uri());
  }
  const std::string dir = DirName(*step) + "/";
  auto get = [&](const std::string& name) -> Result<std::string> {
    auto bytes = store_->Get(Key(dir + name));
    if (!bytes.ok() && bytes.status().code() == StatusCode::kNotFound) {
      return DataLossError("checkpoint " + storage::ObjectUri(*store_, Key(dir)) + " lacks " +
                           name);
    }
    return bytes;
  };
  REEL_ASSIGN_OR_RETURN(Checksums checksums, LoadChecksums(dir));
  auto get_verified = [&](const std::string& name) -> Result<std::string> {
    REEL_ASSIGN_OR_RETURN(std::string bytes, get(name));
    REEL_RETURN_IF_ERROR(Verify(checksums, dir + name, bytes));
    return bytes;
  };
  CheckpointData data;
  data.step = *step;
  REEL_ASSIGN_OR_RETURN(std::string model, get_verified("model.safetensors"));
  REEL_ASSIGN_OR_RETURN(
      data.model,
      models::ReadSafetensors(model, storage::ObjectUri(*store_, Key(dir + "model.safetensors"))));
  REEL_ASSIGN_OR_RETURN(std::string state, get_verified("state.safetensors"));
  REEL_ASSIGN_OR_RETURN(
      data.state,
      models::ReadSafetensors(state, storage::ObjectUri(*store_, Key(dir + "state.safetensors"))));
  REEL_ASSIGN_OR_RETURN(data.config_text, get_verified("config.yaml"));
  return data;
}

}  // namespace reel::train
