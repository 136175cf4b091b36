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
      {"loader", {{"seed", loader.seed}, {"epoch", loader.epoch}, {"position", loader.position}}}};
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
  JsonFields l(f.Object("loader"), "loader");
  s.loader.seed = l.Uint("seed");
  s.loader.epoch = l.Int("epoch");
  s.loader.position = l.Uint("position");
  if (!f.ok()) return DataLossError(context + ": " + f.error());
  if (!l.ok()) return DataLossError(context + ": " + l.error());
  if (s.step < 0 || s.samples < 0 || s.loader.epoch < 0) {
    return DataLossError(context + ": negative step, samples or epoch");
  }
  return s;
}

}  // namespace reel::train
