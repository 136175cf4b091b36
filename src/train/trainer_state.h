// The trainer's own state in a checkpoint (state.safetensors' metadata "trainer"), with one codec
// that SaveCheckpoint writes and Resume reads:
//   {"step": 40, "samples": 320, "skipped_steps": 0, "last_eval_epoch": 3, "loss_scale": 65536,
//    "loss_scale_good_steps": 12, "total_steps": 200, "model": "r2plus1d",
//    "loader": {"seed": 4, "epoch": 4, "position": 0, "world_size": 2}}
// ("loader" is LoaderState's JSON: a job resized mid-epoch adds "before": [[4, 16]].)
// Thread-safety: a value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "loader/sample_plan.h"

namespace reel::train {

struct TrainerState {
  int64_t step = 0;
  int64_t samples = 0;        // training samples seen, over all ranks
  int64_t skipped_steps = 0;  // steps the loss scaler skipped (inf/NaN gradients)
  int64_t last_eval_epoch = -1;
  double loss_scale = 65536.0;
  int64_t loss_scale_good_steps = 0;
  int64_t total_steps = 0;  // of the schedule, for people reading the checkpoint
  std::string model;        // the config's model name, for people
  loader::LoaderState loader;

  std::string ToJson() const;
  // Errors: DataLoss naming `where` and the key that is missing or has the wrong type. Keys that
  // a release before them did not write (skipped_steps, loss scaler) take their defaults.
  static Result<TrainerState> FromJson(std::string_view text, std::string_view where);
};

}  // namespace reel::train
