#include "ingest/run_state.h"

#include "base/json.h"

namespace reel::ingest::internal {

using nlohmann::json;

std::string RunState::ToJson() const {
  json splits_json = json::object();
  for (const auto& [name, s] : splits) {
    splits_json[name] = {
        {"shards", s.shards}, {"next_video", s.next.video}, {"next_clip", s.next.clip}};
  }
  json failed_json = json::array();
  for (const auto& [index, f] : failed) {
    failed_json.push_back({{"index", index}, {"key", f.key}, {"reason", f.reason}});
  }
  return json{{"version", 1},
              {"source_hash", source_hash},
              {"settings", settings},
              {"splits", splits_json},
              {"failed", failed_json}}
      .dump(2);
}

Result<RunState> RunState::FromJson(const std::string& text, const std::string& where) {
  REEL_ASSIGN_OR_RETURN(json doc, ParseJson(text, where));
  JsonFields top(doc, "");
  if (top.Int("version") != 1 || !top.ok()) {
    return DataLossError(where + ": not a Reel ingest state (version 1)");
  }
  RunState state;
  state.source_hash = top.String("source_hash");
  state.settings = top.Object("settings");
  const json& splits = top.Object("splits");
  const json& failed = top.Array("failed");
  if (!top.ok()) return DataLossError(where + ": " + top.error());
  for (const auto& [name, value] : splits.items()) {
    JsonFields s(value, "splits." + name);
    SplitState split;
    split.shards = static_cast<uint32_t>(s.Uint("shards"));
    split.next.video = s.Int("next_video");
    split.next.clip = static_cast<int>(s.Int("next_clip"));
    if (!s.ok()) return DataLossError(where + ": " + s.error());
    state.splits[name] = split;
  }
  for (size_t i = 0; i < failed.size(); ++i) {
    JsonFields f(failed[i], "failed[" + std::to_string(i) + "]");
    const int64_t index = f.Int("index");
    FailedVideo video{f.String("key"), f.String("reason")};
    if (!f.ok()) return DataLossError(where + ": " + f.error());
    state.failed.emplace_back(index, std::move(video));
  }
  return state;
}

}  // namespace reel::ingest::internal
