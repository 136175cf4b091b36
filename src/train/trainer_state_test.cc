#include "train/trainer_state.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel::train {
namespace {

TEST(TrainerStateTest, RoundTripsEveryField) {
  TrainerState s;
  s.step = 40;
  s.samples = 320;
  s.skipped_steps = 2;
  s.last_eval_epoch = 3;
  s.loss_scale = 1024.5;
  s.loss_scale_good_steps = 12;
  s.total_steps = 200;
  s.model = "r2plus1d";
  s.loader = {4, 5, 17, 2, {{4, 8}}};
  ASSERT_OK_AND_ASSIGN(TrainerState back, TrainerState::FromJson(s.ToJson(), "ckpt"));
  EXPECT_EQ(back.step, 40);
  EXPECT_EQ(back.samples, 320);
  EXPECT_EQ(back.skipped_steps, 2);
  EXPECT_EQ(back.last_eval_epoch, 3);
  EXPECT_DOUBLE_EQ(back.loss_scale, 1024.5);
  EXPECT_EQ(back.loss_scale_good_steps, 12);
  EXPECT_EQ(back.total_steps, 200);
  EXPECT_EQ(back.model, "r2plus1d");
  EXPECT_EQ(back.loader.seed, 4u);
  EXPECT_EQ(back.loader.epoch, 5);
  EXPECT_EQ(back.loader.position, 17u);
  EXPECT_EQ(back.loader.world_size, 2);
  EXPECT_EQ(back.loader.before, (std::vector<loader::PlanSegment>{{4, 8}}));
  EXPECT_EQ(back.ToJson(), s.ToJson());
}

// Exactly what release 0.1.0's trainer wrote (Run::SaveCheckpoint before this codec).
TEST(TrainerStateTest, ReadsWhatThePreviousReleaseWrote) {
  const char* old =
      R"({"last_eval_epoch":1,"loader":{"epoch":2,"position":0,"seed":4},"loss_scale":65536.0,)"
      R"("loss_scale_good_steps":0,"model":"r2plus1d","samples":80,"skipped_steps":0,"step":10,)"
      R"("total_steps":40})";
  ASSERT_OK_AND_ASSIGN(TrainerState s, TrainerState::FromJson(old, "old"));
  EXPECT_EQ(s.step, 10);
  EXPECT_EQ(s.samples, 80);
  EXPECT_EQ(s.loader.epoch, 2);
  EXPECT_EQ(s.loader.seed, 4u);
}

TEST(TrainerStateTest, BadStateNamesTheCheckpointAndTheKey) {
  auto not_json = TrainerState::FromJson("{\"step\": 3", "file:///runs/a/step-3");
  EXPECT_STATUS(not_json, StatusCode::kDataLoss);
  EXPECT_NE(not_json.status().message().find("file:///runs/a/step-3: trainer state"),
            std::string::npos);
  auto wrong_type = TrainerState::FromJson(
      R"({"step": "ten", "samples": 1, "loader": {"seed": 1, "epoch": 0, "position": 0}})", "x");
  EXPECT_STATUS(wrong_type, StatusCode::kDataLoss);
  EXPECT_NE(wrong_type.status().message().find("step: expected an integer, got string"),
            std::string::npos)
      << wrong_type.status().message();
  auto no_loader = TrainerState::FromJson(R"({"step": 1, "samples": 1})", "x");
  EXPECT_NE(no_loader.status().message().find("loader: missing"), std::string::npos)
      << no_loader.status().message();
  auto bad_position = TrainerState::FromJson(
      R"({"step": 1, "samples": 1, "loader": {"seed": 1, "epoch": 0, "position": -4}})", "x");
  EXPECT_NE(bad_position.status().message().find("loader.position: expected an unsigned"),
            std::string::npos)
      << bad_position.status().message();
}

}  // namespace
}  // namespace reel::train
