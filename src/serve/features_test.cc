// Feature extraction end to end on real clips (datagen videos ingested as frames) and the
// previous release's checkpoint: the embeddings are what the backbone's classifier reads, a
// head trains on them, and head + backbone registered as one version give the head's answers.
#include "serve/features.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "base/files.h"
#include "dataset/manifest.h"
#include "dataset/shard_reader.h"
#include "ingest/testing/datagen_dataset.h"
#include "loader/loader.h"
#include "models/model_zoo.h"
#include "models/safetensors.h"
#include "models/state_dict.h"
#include "storage/open.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "train/registration.h"
#include "train/trainer.h"

namespace reel::serve {
namespace {

using ::testing::HasSubstr;

std::string ReleaseCheckpointStep() {
  return reel::testing::SourcePath("testdata/checkpoints/release-0.1.0/step-0000000004");
}

// 8 classes x 3 datagen videos as 8-frame clips at short side 32, made once, in memory.
const std::string& ClipsDataset() {
  static const std::string uri = [] {
    ingest::testing::DatagenDataset d;
    d.mode = dataset::DatasetMode::kFrames;
    d.shard_bytes = 128ull << 20;
    EXPECT_OK(ingest::testing::MakeDatagenDataset("features", "mem://features-clips", d));
    return std::string("mem://features-clips");
  }();
  return uri;
}

std::unique_ptr<Model> Backbone() {
  auto model = LoadModel(ReleaseCheckpointStep(), LoadOptions{});
  EXPECT_OK(model);
  return model.ok() ? std::move(*model) : nullptr;
}

// Every record of a features dataset's split: key -> embedding.
std::map<std::string, std::vector<float>> StoredEmbeddings(const std::string& uri,
                                                           const std::string& split) {
  std::map<std::string, std::vector<float>> out;
  auto store = storage::OpenStore(uri);
  EXPECT_OK(store);
  auto catalog = dataset::ListShards(**store, "", split);
  EXPECT_OK(catalog);
  for (uint32_t shard : *catalog) {
    auto reader = dataset::ShardReader::Open(**store, "", split, shard);
    EXPECT_OK(reader);
    for (size_t i = 0; i < (*reader)->num_records(); ++i) {
      auto record = (*reader)->ReadRecord(i);
      EXPECT_OK(record);
      std::vector<float> e(record->payload.size() / sizeof(float));
      std::memcpy(e.data(), record->payload.data(), record->payload.size());
      out[record->key] = std::move(e);
    }
  }
  return out;
}

TEST(Features, EachClipsEmbeddingIsWhatTheBackbonesClassifierReads) {
  std::unique_ptr<Model> model = Backbone();
  FeatureOptions o;
  o.dataset = ClipsDataset();
  o.output = "mem://features-out-1";
  o.batch = 5;  // not a divisor of the split sizes: the padded last batch is skipped by key
  ASSERT_OK_AND_ASSIGN(FeatureSummary summary, ExtractFeatures(o, *model));
  EXPECT_EQ(summary.dim, 32);  // width 4 x 8 at the last stage

  ASSERT_OK_AND_ASSIGN(auto out, storage::OpenStore(o.output));
  ASSERT_OK_AND_ASSIGN(dataset::Manifest m, dataset::Manifest::Read(*out, ""));
  ASSERT_OK_AND_ASSIGN(auto in, storage::OpenStore(o.dataset));
  ASSERT_OK_AND_ASSIGN(dataset::Manifest source, dataset::Manifest::Read(*in, ""));
  EXPECT_EQ(m.mode, dataset::DatasetMode::kFeatures);
  EXPECT_EQ(m.classes, source.classes);
  EXPECT_EQ(m.feature_dim(), 32);
  EXPECT_EQ(m.features["layer"], "avgpool");
  EXPECT_EQ(m.features["model"]["source"], ReleaseCheckpointStep());
  for (const auto& [split, info] : source.splits)
    EXPECT_EQ(m.splits.at(split).records, info.records);

  // The classifier's own weights turn each stored embedding into the model's logits.
  ASSERT_OK_AND_ASSIGN(std::string bytes,
                       ReadFileToString(ReleaseCheckpointStep() + "/model.safetensors"));
  ASSERT_OK_AND_ASSIGN(models::SafetensorsFile weights, models::ReadSafetensors(bytes));
  const auto& w = weights.tensors.at("fc.weight");
  const auto& b = weights.tensors.at("fc.bias");
  ASSERT_EQ(w.shape, (std::vector<int64_t>{8, 32}));
  auto floats = [](const models::TensorBytes& t) {
    std::vector<float> v(t.data.size() / 4);
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
  };
  const std::vector<float> fw = floats(w), fb = floats(b);
  const auto embeddings = StoredEmbeddings(o.output, "train");
  loader::LoaderOptions lo;
  lo.split = "train";
  lo.batch_size = 4;
  lo.plan.shuffle = false;
  lo.plan.remainder = loader::Remainder::kPad;
  lo.clip = model->info().video.clip;
  lo.clip.clips_per_video = 1;
  lo.clip.sampling = loader::ClipSampling::kCenter;
  lo.transform = model->info().video.transform;
  lo.transform.train = false;
  lo.transform.flip = false;
  ASSERT_OK_AND_ASSIGN(auto clips, loader::Loader::Open(*in, lo));
  int compared = 0;
  while (true) {
    ASSERT_OK_AND_ASSIGN(auto batch, clips->Next());
    if (!batch) break;
    ASSERT_OK_AND_ASSIGN(std::vector<float> logits, model->Forward(batch->f32.data(), 4));
    for (int i = 0; i < 4; ++i) {
      const std::vector<float>& e = embeddings.at(batch->keys[static_cast<size_t>(i)]);
      ASSERT_EQ(e.size(), 32u);
      for (int c = 0; c < 8; ++c) {
        double z = fb[static_cast<size_t>(c)];
        for (int k = 0; k < 32; ++k) z += double(fw[static_cast<size_t>(c * 32 + k)]) * e[k];
        EXPECT_NEAR(z, logits[static_cast<size_t>(i * 8 + c)], 1e-4);
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, static_cast<int>(source.splits.at("train").records));
}

TEST(Features, ALayerBeforeTheLastGivesThatStagesWidth) {
  std::unique_ptr<Model> model = Backbone();
  FeatureOptions o;
  o.dataset = ClipsDataset();
  o.output = "mem://features-out-2";
  o.layer = "layer2";
  o.splits = {"test"};
  ASSERT_OK_AND_ASSIGN(FeatureSummary summary, ExtractFeatures(o, *model));
  EXPECT_EQ(summary.dim, 8);  // width 4 x 2
  ASSERT_EQ(summary.splits.size(), 1u);
  o.output = "mem://features-out-3";
  o.layer = "layer9";
  EXPECT_STATUS(ExtractFeatures(o, *model), StatusCode::kInvalidArgument);
}

TEST(Features, BadInputsAreRefusedAndAnExistingDatasetIsKept) {
  std::unique_ptr<Model> model = Backbone();
  FeatureOptions o;
  o.dataset = ClipsDataset();
  o.output = ClipsDataset();  // already a dataset
  EXPECT_STATUS(ExtractFeatures(o, *model), StatusCode::kFailedPrecondition);
  o.output = "mem://features-out-4";
  o.splits = {"nosuchsplit"};
  EXPECT_STATUS(ExtractFeatures(o, *model), StatusCode::kNotFound);
  o.splits = {};
  o.batch = 0;
  EXPECT_STATUS(ExtractFeatures(o, *model), StatusCode::kInvalidArgument);
  o.batch = 4;
  o.dataset = "mem://features-nothing-here";
  EXPECT_STATUS(ExtractFeatures(o, *model), StatusCode::kNotFound);
}

// A linear head trained on the stored features, and registered: the combined version is the
// backbone's architecture with the head as its classifier, and gives the head's logits on videos.
TEST(Features, AHeadTrainsOnFeaturesAndRegistersWithItsBackboneAsOneModel) {
  std::unique_ptr<Model> backbone = Backbone();
  FeatureOptions o;
  o.dataset = ClipsDataset();
  o.output = "mem://features-out-5";
  ASSERT_OK(ExtractFeatures(o, *backbone).status());

  testing::TempDir dir;
  const std::string yaml = "run_dir: " + dir.Join("run") +
                           "\nseed: 3\nthreads: 1\n"
                           "model: {name: head, num_classes: 8, hidden: [16]}\n"
                           "data: {dataset: " +
                           o.output +
                           ", batch_size: 4, workers: 1, flip: false}\n"
                           "optimizer: {name: adamw, lr: 0.01, weight_decay: 0}\n"
                           "train: {epochs: 3, log_every: 5}\n"
                           "checkpoint: {every_steps: 0}\n";
  ASSERT_OK_AND_ASSIGN(train::TrainConfig config, train::ParseTrainConfigText(yaml, "head.yaml"));
  train::TrainOptions to;
  to.progress = false;
  ASSERT_OK_AND_ASSIGN(train::TrainResult trained, train::RunTraining(config, to));
  EXPECT_TRUE(trained.finished);

  // A video model on features, and a head on clips, are refused with the reason.
  train::TrainConfig wrong = config;
  wrong.model.name = "r2plus1d";
  auto refused = train::RunTraining(wrong, to);
  EXPECT_STATUS(refused, StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("holds features"));

  ASSERT_OK_AND_ASSIGN(registry::NewVersion v, train::VersionFromPath(dir.Join("run")));
  EXPECT_EQ(v.architecture["name"], "r2plus1d");
  EXPECT_EQ(v.architecture["width"], 4);
  EXPECT_EQ(v.architecture["hidden"], nlohmann::json::array({16}));
  EXPECT_EQ(v.recipe["op"], "head");
  EXPECT_EQ(v.recipe["backbone"], ReleaseCheckpointStep());
  EXPECT_TRUE(v.weights.tensors.count("fc.0.weight"));
  int stage4 = 0;
  for (const auto& [name, t] : v.weights.tensors) stage4 += name.rfind("layer4.", 0) == 0;
  EXPECT_GT(stage4, 0);  // the backbone's layers are in it
  EXPECT_FALSE(v.weights.tensors.count("fc.weight"));
  EXPECT_THAT(v.config, HasSubstr("clip_frames: 4"));  // the backbone's data settings

  // Served from the run folder, the combined model's logits are the head's on the embeddings.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> combined, LoadModel(dir.Join("run"), LoadOptions{}));
  ASSERT_OK_AND_ASSIGN(train::CheckpointStore checkpoints,
                       train::CheckpointStore::Open(config.checkpoint_uri));
  ASSERT_OK_AND_ASSIGN(train::CheckpointData head, checkpoints.Load(std::nullopt));
  models::ModelSpec spec = config.model;
  spec.in_features = 32;
  ASSERT_OK_AND_ASSIGN(torch::nn::AnyModule head_module, models::BuildModel(spec));
  ASSERT_OK(models::LoadStateDict(*head_module.ptr(), head.model));
  head_module.ptr()->eval();

  const int64_t sample = backbone->info().sample_size();
  std::vector<float> clip(static_cast<size_t>(2 * sample));
  for (size_t i = 0; i < clip.size(); ++i) clip[i] = std::sin(0.01 * static_cast<double>(i));
  ASSERT_OK_AND_ASSIGN(Embeddings e, backbone->Embed(clip.data(), 2, "avgpool"));
  ASSERT_OK_AND_ASSIGN(std::vector<float> logits, combined->Forward(clip.data(), 2));
  torch::NoGradGuard no_grad;
  torch::Tensor expected =
      head_module.forward(torch::from_blob(e.values.data(), {2, 32}, torch::kFloat32));
  ASSERT_EQ(logits.size(), 16u);
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_NEAR(logits[static_cast<size_t>(i)], expected.flatten()[i].item<float>(), 1e-4);
  }
}

}  // namespace
}  // namespace reel::serve
