#include "train/trainer_state.h"

#include <nlohmann/json.hpp>

#include "base/json.h"

namespace reel::train {

std::string TrainerState::ToJson() const {
  nlohmann::json j = {
      {"step", step},
      {"samples", samples},
      {"skipped_steps", skipped_steps},
      {"last_eval_epoch", last_eval_epoch},
      {"loss_scale", loss_scale},
      {"loss_scale_good_steps", loss_scale_good_steps},
      {"total_steps", total_steps},
      {"model", model},
      {"loader", nlohmann::json::parse(loader.ToJson())}};  // loader/sample_plan.h's codec
  return j.dump();
}

Result<TrainerState> TrainerState::FromJson(std::string_view text, std::string_view where) {
  const std::string context = std::string(where) + ": trainer state";
  auto doc = ParseJson(text, context);
  if (!doc.ok()) return doc.status();
  JsonFields f(*doc, "");
  TrainerState s;
  s.step = f.Int("step");
  s.samples = f.Int("samples");
  if (f.Has("skipped_steps")) s.skipped_steps = f.Int("skipped_steps");
  if (f.Has("last_eval_epoch")) s.last_eval_epoch = f.Int("last_eval_epoch");
  if (f.Has("loss_scale")) s.loss_scale = f.Double("loss_scale");
  if (f.Has("loss_scale_good_steps")) s.loss_scale_good_steps = f.Int("loss_scale_good_steps");
  if (f.Has("total_steps")) s.total_steps = f.Int("total_steps");
  if (f.Has("model")) s.model = f.String("model");
  const nlohmann::json& loader = f.Object("loader");
  if (!f.ok()) return DataLossError(context + ": " + f.error());
  Result<loader::LoaderState> state = loader::LoaderState::FromJson(loader.dump());
  if (!state.ok()) return DataLossError(context + ": " + state.status().message());
  s.loader = *std::move(state);
  if (s.step < 0 || s.samples < 0 || s.loader.epoch < 0) {
    return DataLossError(context + ": negative step, samples or epoch");
  }
  return s;
}

}  // namespace reel::train
