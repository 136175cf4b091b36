#include "train/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

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

std::string CheckpointStore::uri() const { return storage::ObjectUri(*store_, prefix_); }

Status CheckpointStore::Save(const CheckpointData& checkpoint, int keep) {
  const std::string dir = DirName(checkpoint.step) + "/";
  REEL_ASSIGN_OR_RETURN(std::string model, models::WriteSafetensors(checkpoint.model));
  REEL_ASSIGN_OR_RETURN(std::string state, models::WriteSafetensors(checkpoint.state));
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "model.safetensors"), model));
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "state.safetensors"), state));
  REEL_RETURN_IF_ERROR(store_->Put(Key(dir + "config.yaml"), checkpoint.config_text));
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
  auto json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("step") || !json["step"].is_number_integer() || json["step"].get<int64_t>() < 0) {
    return DataLossError(storage::ObjectUri(*store_, Key("latest")) + " is not a checkpoint pointer");
  }
  return std::optional<int64_t>(json["step"].get<int64_t>());
}

Result<std::vector<int64_t>> CheckpointStore::Steps() {
  REEL_ASSIGN_OR_RETURN(auto objects, storage::ListAll(*store_, Key("step-")));
  std::vector<int64_t> steps;
  for (const auto& o : objects) {
    std::string rest = o.key.substr(prefix_.size());
    long long step = 0;
    char file[64] = {0};
    if (std::sscanf(rest.c_str(), "step-%lld/%63s", &step, file) == 2 && std::string(file) == "model.safetensors") {
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
      return DataLossError("checkpoint " + storage::ObjectUri(*store_, Key(dir)) + " lacks " + name);
    }
    return bytes;
  };
  CheckpointData data;
  data.step = *step;
  REEL_ASSIGN_OR_RETURN(std::string model, get("model.safetensors"));
  REEL_ASSIGN_OR_RETURN(data.model, models::ReadSafetensors(model, storage::ObjectUri(*store_, Key(dir + "model.safetensors"))));
  REEL_ASSIGN_OR_RETURN(std::string state, get("state.safetensors"));
  REEL_ASSIGN_OR_RETURN(data.state, models::ReadSafetensors(state, storage::ObjectUri(*store_, Key(dir + "state.safetensors"))));
  REEL_ASSIGN_OR_RETURN(data.config_text, get("config.yaml"));
  return data;
}

}  // namespace reel::train
