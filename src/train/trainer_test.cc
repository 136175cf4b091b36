// The trainer end to end on a real (small) dataset: datagen videos ingested into a memory store.
#include "train/trainer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "ingest/testing/datagen_dataset.h"
#include "storage/open.h"
#include "testing/status_matchers.h"
#include "train/checkpoint.h"

namespace reel::train {
namespace {

// 8 classes x 3 videos, 8-frame clips at short side 32, made once per process.
const std::string& DatasetUri() {
  static const std::string uri = [] {
    ingest::testing::DatagenDataset d;
    d.width = 40;
    d.height = 32;
    d.frames = 16;
    EXPECT_OK(ingest::testing::MakeDatagenDataset("trainer", "mem://trainer-ds", d));
    return std::string("mem://trainer-ds");
  }();
  return uri;
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("reel-trainer-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A tiny run: R(2+1)D of width 4 on 4-frame 24x24 clips, every step logged.
  TrainConfig Config(const std::string& run, const std::string& extra = "") {
    std::string text = "run_dir: " + (dir_ / run).string() + "\n" +
                       "seed: 3\nthreads: 1\n"
                       "model: {name: r2plus1d, num_classes: 8, width: 4, layers: [1, 1, 1, 1]}\n"
                       "data: {dataset: " +
                       DatasetUri() +
                       ", batch_size: 2, workers: 2, clip_frames: 4,"
                       " frame_stride: 2, size: 24, flip: true}\n"
                       "train: {max_steps: 10, log_every: 1, eval_every_epochs: 0}\n"
                       "checkpoint: {uri: " +
                       (dir_ / run / "ckpt").string() + ", every_steps: 4, keep: 2}\n" + extra;
    auto config = ParseTrainConfigText(text, "test.yaml");
    EXPECT_OK(config);
    return *config;
  }

 public:
  static std::map<int64_t, double> Losses(const std::string& run_dir) {
    std::map<int64_t, double>
        losses;  // the last line for a step wins: a resumed run rewrites later steps
    std::ifstream in(run_dir + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      if (!j.contains("event")) losses[j["step"].get<int64_t>()] = j["loss"].get<double>();
    }
    return losses;
  }

 protected:
  std::filesystem::path dir_;
};

void ExpectResumeReproduces(TrainerTest* test, const TrainConfig& whole, const TrainConfig& parts) {
  TrainOptions quiet;
  quiet.progress = false;
  auto a = RunTraining(whole, quiet);
  ASSERT_OK(a);
  EXPECT_TRUE(a->finished);
  EXPECT_EQ(a->steps, 10);

  TrainOptions first = quiet;
  first.stop_after_steps = 6;  // preempted after step 6 (a checkpoint is written on the way out)
  auto b1 = RunTraining(parts, first);
  ASSERT_OK(b1);
  EXPECT_FALSE(b1->finished);
  EXPECT_EQ(b1->steps, 6);
  TrainOptions again = quiet;
  again.resume = true;
  auto b2 = RunTraining(parts, again);
  ASSERT_OK(b2);
  EXPECT_EQ(b2->resumed_from, 6);
  EXPECT_TRUE(b2->finished);
  EXPECT_EQ(b2->samples, a->samples);

  auto la = TrainerTest::Losses(whole.run_dir), lb = TrainerTest::Losses(parts.run_dir);
  ASSERT_EQ(la.size(), 10u);
  ASSERT_EQ(lb.size(), 10u);
  for (int64_t step = 1; step <= 10; ++step) EXPECT_EQ(la[step], lb[step]) << "step " << step;
  EXPECT_NE(la[1], la[10]);
  ASSERT_TRUE(a->eval && b2->eval);
  EXPECT_EQ(a->eval->ToJson(), b2->eval->ToJson());
}

TEST_F(TrainerTest, ResumeWithSgdGivesTheUninterruptedLossCurve) {
  const std::string extra =
      "optimizer: {name: sgd, lr: 0.05, momentum: 0.9, nesterov: true}\n"
      "schedule: {warmup_steps: 3}\n";
  ExpectResumeReproduces(this, Config("whole", extra), Config("parts", extra));
}

TEST_F(TrainerTest, ResumeWithAdamWAccumulationClippingAndSmoothingGivesTheSameLossCurve) {
  // Through overrides, since the base config already has a train section. Two micro-batches per
  // step cross the epoch boundary, with an evaluation there.
  auto make = [&](const std::string& run) {
    TrainConfig base = Config(run);
    auto text = ApplyConfigOverrides(
        base.source_text,
        {"optimizer={name: adamw, lr: 0.003, weight_decay: 0.05}",
         "train={max_steps: 10, log_every: 1, eval_every_epochs: 1, grad_accum: 2,"
         " clip_grad_norm: 0.5, label_smoothing: 0.1}"});
    EXPECT_OK(text);
    auto config = ParseTrainConfigText(*text, "test.yaml");
    EXPECT_OK(config);
    return *config;
  };
  ExpectResumeReproduces(this, make("whole"), make("parts"));
}

TEST_F(TrainerTest, CheckpointsAreKeptToTheNewestAndEvalReadsThem) {
  TrainConfig config = Config("run");
  TrainOptions quiet;
  quiet.progress = false;
  auto result = RunTraining(config, quiet);
  ASSERT_OK(result);
  auto store = CheckpointStore::Open(config.checkpoint_uri);
  ASSERT_OK(store);
  auto steps = store->Steps();
  ASSERT_OK(steps);
  EXPECT_EQ(*steps, (std::vector<int64_t>{8, 10}));  // every 4 steps and at the end, keep 2
  auto latest = store->LatestStep();
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ(**latest, 10);

  // The final evaluation equals `reel eval` of the last checkpoint.
  auto report = RunEvaluation(config);
  ASSERT_OK(report);
  ASSERT_TRUE(result->eval.has_value());
  EXPECT_EQ(report->ToJson(), result->eval->ToJson());
  EXPECT_EQ(report->videos, 8);  // one test video per class
  std::ifstream eval_json(config.run_dir + "/eval.json");
  EXPECT_TRUE(eval_json.good());

  // Multi-clip evaluation: three clips per stored clip, still grouped into the same videos.
  EvalOptions multi;
  multi.eval_clips = 3;
  auto three = RunEvaluation(config, multi);
  ASSERT_OK(three);
  EXPECT_EQ(three->clips, report->clips * 3);
  EXPECT_EQ(three->videos, report->videos);

  EvalOptions old;
  old.step = 4;  // deleted by keep: 2
  auto gone = RunEvaluation(config, old);
  EXPECT_FALSE(gone.ok());
}

TEST_F(TrainerTest, ExistingCheckpointsAreNotOverwrittenWithoutResume) {
  TrainConfig config = Config("run");
  TrainOptions options;
  options.progress = false;
  options.stop_after_steps = 2;
  ASSERT_OK(RunTraining(config, options));
  auto again = RunTraining(config, options);
  ASSERT_FALSE(again.ok());
  EXPECT_STATUS(again, StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("--resume"), std::string::npos)
      << again.status().message();
}

TEST_F(TrainerTest, ConfigsThatDoNotFitTheDatasetOrTheMachineAreRefused) {
  TrainOptions quiet;
  quiet.progress = false;
  TrainConfig classes = Config("classes");
  classes.model.num_classes = 10;
  auto r1 = RunTraining(classes, quiet);
  ASSERT_FALSE(r1.ok());
  EXPECT_STATUS(r1, StatusCode::kInvalidArgument);
  EXPECT_NE(r1.status().message().find("has 8 classes"), std::string::npos)
      << r1.status().message();

  TrainConfig big = Config("big");
  big.data.batch_size = 1000;
  auto r2 = RunTraining(big, quiet);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("batch_size"), std::string::npos) << r2.status().message();

  if (!torch::cuda::is_available()) {
    TrainConfig cuda = Config("cuda");
    cuda.device = "cuda";
    auto r3 = RunTraining(cuda, quiet);
    ASSERT_FALSE(r3.ok());
    EXPECT_STATUS(r3, StatusCode::kInvalidArgument);
    TrainConfig amp = Config("amp");
    amp.amp = AmpMode::kFp16;
    amp.device = "cpu";
    auto r4 = RunTraining(amp, quiet);
    ASSERT_FALSE(r4.ok());
    EXPECT_NE(r4.status().message().find("CUDA"), std::string::npos) << r4.status().message();
  }

  // Resuming a checkpoint of another model names the mismatch.
  TrainConfig first = Config("mixed");
  TrainOptions stop = quiet;
  stop.stop_after_steps = 1;
  ASSERT_OK(RunTraining(first, stop));
  TrainConfig wider = first;
  wider.model.width = 8;
  TrainOptions resume = quiet;
  resume.resume = true;
  auto r5 = RunTraining(wider, resume);
  ASSERT_FALSE(r5.ok());
  EXPECT_STATUS(r5, StatusCode::kFailedPrecondition);
  EXPECT_NE(r5.status().message().find("does not fit"), std::string::npos) << r5.status().message();
}

}  // namespace
}  // namespace reel::train
