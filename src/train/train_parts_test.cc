// The trainer's parts on their own: config validation, optimiser state by name, the loss scaler
// and the checkpoint store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "models/model_zoo.h"
#include "models/state_dict.h"
#include "storage/local_store.h"
#include "storage/memory_store.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "train/amp.h"
#include "train/checkpoint.h"
#include "train/evaluation.h"
#include "train/optimizer.h"
#include "train/train_config.h"
#include "train/trainer_state.h"

namespace reel::train {
namespace {

const char* kConfig = R"(run_dir: /tmp/run
seed: 7
model: {name: r2plus1d, num_classes: 8, width: 16, layers: [1, 1, 1, 1]}
data:
  dataset: s3://bucket/ds
  batch_size: 4
  clip_frames: 8
  flip: false
optimizer: {name: adamw, lr: 0.001, betas: [0.8, 0.99], weight_decay: 0.05}
schedule: {warmup_epochs: 2, min_lr: 1.0e-5}
train: {epochs: 30, grad_accum: 2, clip_grad_norm: 1.0, label_smoothing: 0.1, amp: bf16}
checkpoint: {every_steps: 50, keep: 2}
)";

std::string ErrorOf(const std::string& text) {
  auto c = ParseTrainConfigText(text, "train.yaml");
  return c.ok() ? "" : c.status().message();
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST(TrainConfigTest, AFullConfigIsRead) {
  auto c = ParseTrainConfigText(kConfig, "train.yaml");
  ASSERT_OK(c);
  EXPECT_EQ(c->seed, 7u);
  EXPECT_EQ(c->model.width, 16);
  EXPECT_EQ(c->data.dataset, "s3://bucket/ds");
  EXPECT_FALSE(c->data.flip);
  EXPECT_EQ(c->optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_DOUBLE_EQ(c->optimizer.beta1, 0.8);
  EXPECT_EQ(c->warmup_epochs, 2);
  EXPECT_EQ(c->grad_accum, 2);
  EXPECT_EQ(c->amp, AmpMode::kBf16);
  EXPECT_EQ(c->checkpoint_uri, "/tmp/run/checkpoints");
  EXPECT_EQ(c->source_text, kConfig);
  auto eval = c->EvalLoaderOptions("test");
  EXPECT_FALSE(eval.transform.train);
  EXPECT_FALSE(eval.plan.shuffle);
}

TEST(TrainConfigTest, MistakesAreNamedWithFileLineAndKey) {
  EXPECT_EQ(ErrorOf(Replace(kConfig, "optimizer:", "optimiser:"))
                .rfind("train.yaml:9:1: unknown key 'optimiser'", 0),
            0u)
      << ErrorOf(Replace(kConfig, "optimizer:", "optimiser:"));
  std::string lr = ErrorOf(Replace(kConfig, "lr: 0.001", "lr: fast"));
  EXPECT_NE(lr.find("train.yaml:9:"), std::string::npos) << lr;
  EXPECT_NE(lr.find("'optimizer.lr'"), std::string::npos) << lr;
  EXPECT_NE(ErrorOf(Replace(kConfig, "betas: [0.8, 0.99]", "momentum: 0.9"))
                .find("not an option of adamw"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kConfig, "epochs: 30", "epochs: 30, max_steps: 5"))
                .find("either epochs or max_steps"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kConfig, "amp: bf16", "amp: fp8")).find("unknown amp mode 'fp8'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kConfig, "batch_size: 4", "batch_size: 0"))
                .find("'data.batch_size': must be in"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kConfig, "name: r2plus1d", "name: r4d")).find("unknown model 'r4d'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kConfig, "  dataset: s3://bucket/ds\n", "")).find("dataset"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(kConfig, "flip: false", "flip: sometimes")).find("'data.flip'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("- a\n- b\n").find("map of sections"), std::string::npos);
}

TEST(TrainConfigTest, LabelPairsOfFlipsAndReversalReachTheTrainLoaderOnly) {
  const std::string text = Replace(kConfig, "flip: false",
                                   "reverse: true\n  flip_pairs: [[MoveLeft, MoveRight]]\n"
                                   "  reverse_pairs: [[Grow, Shrink], [MoveUp, MoveDown]]");
  ASSERT_OK_AND_ASSIGN(TrainConfig c, ParseTrainConfigText(text, "train.yaml"));
  loader::LoaderOptions train = c.TrainLoaderOptions(2, 1);
  EXPECT_TRUE(train.transform.flip);
  EXPECT_TRUE(train.transform.reverse);
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(train.flip_pairs, (Pairs{{"MoveLeft", "MoveRight"}}));
  EXPECT_EQ(train.reverse_pairs, (Pairs{{"Grow", "Shrink"}, {"MoveUp", "MoveDown"}}));
  loader::LoaderOptions eval = c.EvalLoaderOptions("test");
  EXPECT_FALSE(eval.transform.flip || eval.transform.reverse);

  const std::string one = ErrorOf(Replace(text, "[[MoveLeft, MoveRight]]", "[[MoveLeft]]"));
  EXPECT_NE(one.find("train.yaml:9:"), std::string::npos) << one;
  EXPECT_NE(one.find("expected a pair of class names"), std::string::npos) << one;
  EXPECT_NE(ErrorOf(Replace(text, "[[MoveLeft, MoveRight]]", "MoveLeft")), "");
  EXPECT_NE(ErrorOf(Replace(text, "reverse: true", "reverse: 2")).find("'data.reverse'"),
            std::string::npos);
}

TEST(TrainConfigTest, TheDistSectionIsReadAndChecked) {
  auto defaults = ParseTrainConfigText(kConfig, "train.yaml");
  ASSERT_OK(defaults);
  EXPECT_DOUBLE_EQ(defaults->dist.bucket_cap_mb, 25);
  EXPECT_DOUBLE_EQ(defaults->dist.timeout_s, 60);
  EXPECT_TRUE(defaults->dist.broadcast_buffers);
  std::string with_dist =
      std::string(kConfig) +
      "dist: {bucket_cap_mb: 4, first_bucket_mb: 0.5, compression: fp16, broadcast_buffers: false, "
      "timeout_s: 5, connect_timeout_s: 30, iface: eth1}\n";
  auto c = ParseTrainConfigText(with_dist, "train.yaml");
  ASSERT_OK(c);
  EXPECT_DOUBLE_EQ(c->dist.bucket_cap_mb, 4);
  EXPECT_DOUBLE_EQ(c->dist.first_bucket_mb, 0.5);
  EXPECT_EQ(c->dist.compression, "fp16");
  EXPECT_FALSE(c->dist.broadcast_buffers);
  EXPECT_DOUBLE_EQ(c->dist.timeout_s, 5);
  EXPECT_EQ(c->dist.iface, "eth1");
  EXPECT_NE(ErrorOf(Replace(with_dist, "compression: fp16", "compression: int4"))
                .find("unknown gradient compression 'int4'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(with_dist, "timeout_s: 5,", "timeout_s: 0,"))
                .find("'dist.timeout_s': must be in"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Replace(with_dist, "iface: eth1", "nic: eth1")).find("unknown key 'dist.nic'"),
            std::string::npos)
      << ErrorOf(Replace(with_dist, "iface: eth1", "nic: eth1"));
  auto loader = c->TrainLoaderOptions(4, 3);
  EXPECT_EQ(loader.plan.world_size, 4);
  EXPECT_EQ(loader.plan.rank, 3);
}

TEST(TrainConfigTest, TheParallelSectionIsAutoByDefaultOrAFixedLayout) {
  ASSERT_OK_AND_ASSIGN(TrainConfig defaults, ParseTrainConfigText(kConfig, "train.yaml"));
  EXPECT_TRUE(defaults.parallel.auto_stages);
  EXPECT_EQ(defaults.parallel.micro_batches, 4);
  EXPECT_EQ(defaults.parallel.schedule, "1f1b");
  ASSERT_OK_AND_ASSIGN(TrainConfig word,
                       ParseTrainConfigText(std::string(kConfig) + "parallel: auto\n", "t.yaml"));
  EXPECT_TRUE(word.parallel.auto_stages);
  const std::string fixed =
      std::string(kConfig) +
      "parallel: {pipeline_stages: 2, micro_batches: 2, schedule: gpipe, worker_memory_mb: 512}\n";
  ASSERT_OK_AND_ASSIGN(TrainConfig c, ParseTrainConfigText(fixed, "train.yaml"));
  EXPECT_FALSE(c.parallel.auto_stages);
  EXPECT_EQ(c.parallel.pipeline_stages, 2);
  EXPECT_EQ(c.parallel.micro_batches, 2);
  EXPECT_EQ(c.parallel.schedule, "gpipe");
  EXPECT_DOUBLE_EQ(c.parallel.worker_memory_mb, 512);
  using ::testing::HasSubstr;
  EXPECT_THAT(ErrorOf(Replace(fixed, "gpipe", "zigzag")),
              HasSubstr("unknown pipeline schedule 'zigzag'"));
  EXPECT_THAT(ErrorOf(Replace(fixed, "pipeline_stages: 2", "pipeline_stages: 0")),
              HasSubstr("'parallel.pipeline_stages': must be in"));
  EXPECT_THAT(ErrorOf(Replace(fixed, "micro_batches: 2", "micro_batches: 64")),
              HasSubstr("must not exceed data.batch_size"));
  EXPECT_THAT(ErrorOf(std::string(kConfig) + "parallel: manual\n"),
              HasSubstr("expected auto or a map"));
}

TEST(TrainConfigTest, OverridesReplaceAndAddKeys) {
  auto text = ApplyConfigOverrides(kConfig, {"train.epochs=3", "data.workers=6",
                                             "model.layers=[2,2,2,2]", "checkpoint.uri=mem://x"});
  ASSERT_OK(text);
  auto c = ParseTrainConfigText(*text, "train.yaml");
  ASSERT_OK(c);
  EXPECT_EQ(c->epochs, 3);
  EXPECT_EQ(c->data.workers, 6);
  EXPECT_EQ(c->model.layers[0], 2);
  EXPECT_EQ(c->checkpoint_uri, "mem://x");
  EXPECT_FALSE(ApplyConfigOverrides(kConfig, {"train.epochs"}).ok());
  EXPECT_FALSE(ApplyConfigOverrides(kConfig, {"=3"}).ok());
  EXPECT_FALSE(ApplyConfigOverrides(kConfig, {"seed.x=3"}).ok());  // seed is a number, not a map
  EXPECT_FALSE(ApplyConfigOverrides(kConfig, {"a..b=3"}).ok());
}

// A small model and a fixed batch, so that two optimisers can be stepped identically.
struct Toy {
  torch::nn::Sequential model{torch::nn::Linear(6, 5), torch::nn::BatchNorm1d(5),
                              torch::nn::Linear(5, 3)};
  void Backward() {
    torch::manual_seed(99);
    torch::Tensor x = torch::randn({8, 6}), y = torch::randint(0, 3, {8});
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    torch::nn::functional::cross_entropy(model->forward(x), y).backward();
  }
};

void ExpectOptimizerStateRoundTrips(const OptimizerConfig& oc) {
  torch::manual_seed(1);
  Toy a;
  auto opt_a = MakeOptimizer(*a.model, oc);
  for (int i = 0; i < 3; ++i) {
    a.Backward();
    opt_a->step();
  }
  models::SafetensorsFile saved = models::SaveStateDict(*a.model);
  SaveOptimizerState(*opt_a, *a.model, "optimizer.", &saved);
  ASSERT_FALSE(saved.tensors.empty());

  torch::manual_seed(2);  // other initial weights: everything must come from the file
  Toy b;
  auto opt_b = MakeOptimizer(*b.model, oc);
  models::SafetensorsFile weights;
  for (const auto& [name, t] : saved.tensors) {
    if (name.rfind("optimizer.", 0) != 0) weights.tensors[name] = t;
  }
  ASSERT_OK(models::LoadStateDict(*b.model, weights));
  ASSERT_OK(LoadOptimizerState(*opt_b, *b.model, "optimizer.", saved));
  for (int i = 0; i < 2; ++i) {
    a.Backward();
    opt_a->step();
    b.Backward();
    opt_b->step();
  }
  auto pa = a.model->parameters(), pb = b.model->parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "parameter " << i;
}

TEST(OptimizerTest, SgdMomentumStateRestoresByName) {
  OptimizerConfig oc;
  oc.lr = 0.1;
  oc.momentum = 0.9;
  oc.nesterov = true;
  ExpectOptimizerStateRoundTrips(oc);
}

TEST(OptimizerTest, AdamWStateRestoresByName) {
  OptimizerConfig oc;
  oc.kind = OptimizerKind::kAdamW;
  oc.lr = 0.01;
  oc.weight_decay = 0.1;
  oc.decay_norm_and_bias = true;
  ExpectOptimizerStateRoundTrips(oc);
}

TEST(OptimizerTest, NormAndBiasParametersGetNoWeightDecayByDefault) {
  Toy toy;
  OptimizerConfig oc;
  oc.weight_decay = 0.5;
  auto opt = MakeOptimizer(*toy.model, oc);
  ASSERT_EQ(opt->param_groups().size(), 2u);
  EXPECT_EQ(opt->param_groups()[0].params().size(), 2u);  // the two Linear weights
  auto& no_decay = static_cast<torch::optim::SGDOptions&>(opt->param_groups()[1].options());
  EXPECT_EQ(no_decay.weight_decay(), 0);
  SetLearningRate(*opt, 0.25);
  for (auto& g : opt->param_groups()) EXPECT_EQ(g.options().get_lr(), 0.25);
}

// The optimiser's state after one step on the toy's batch.
models::SafetensorsFile StateAfterOneStep(Toy& toy, torch::optim::Optimizer& opt) {
  toy.Backward();
  opt.step();
  models::SafetensorsFile saved;
  SaveOptimizerState(opt, *toy.model, "optimizer.", &saved);
  return saved;
}

TEST(OptimizerTest, BadStateIsRefusedAndLeavesTheOptimizerAlone) {
  Toy toy;
  OptimizerConfig oc;
  auto opt = MakeOptimizer(*toy.model, oc);
  const models::SafetensorsFile saved = StateAfterOneStep(toy, *opt);
  models::SafetensorsFile extra = saved;
  extra.tensors["optimizer.9.weight.momentum_buffer"] = extra.tensors.begin()->second;
  auto status = LoadOptimizerState(*opt, *toy.model, "optimizer.", extra);
  EXPECT_STATUS(status, StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("belongs to no parameter"), std::string::npos)
      << status.message();
  models::SafetensorsFile misshaped = saved;
  misshaped.tensors["optimizer.0.weight.momentum_buffer"] =
      saved.tensors.at("optimizer.2.weight.momentum_buffer");
  EXPECT_FALSE(LoadOptimizerState(*opt, *toy.model, "optimizer.", misshaped).ok());
  EXPECT_EQ(opt->state().size(), 6u);  // untouched by the failed loads
}

// A pipeline stage's optimiser holds some parameters; it loads their state from a file with
// every stage's and skips the rest.
TEST(OptimizerTest, AStagesOptimizerLoadsItsPartOfTheWholeState) {
  Toy toy;
  OptimizerConfig oc;
  auto whole = MakeOptimizer(*toy.model, oc);
  const models::SafetensorsFile saved = StateAfterOneStep(toy, *whole);
  ASSERT_EQ(saved.tensors.size(), 6u);
  auto* first = toy.model[0]->as<torch::nn::Linear>();
  auto stage = MakeOptimizer(first->parameters(), oc);
  ASSERT_OK(LoadOptimizerState(*stage, *toy.model, "optimizer.", saved));
  EXPECT_EQ(stage->state().size(), 2u);  // 0.weight and 0.bias
  models::SafetensorsFile part;
  SaveOptimizerState(*stage, *toy.model, "optimizer.", &part);
  EXPECT_EQ(part.tensors.size(), 2u);
  EXPECT_EQ(part.tensors.count("optimizer.0.weight.momentum_buffer"), 1u);
  EXPECT_EQ(part.tensors.at("optimizer.0.bias.momentum_buffer").data,
            saved.tensors.at("optimizer.0.bias.momentum_buffer").data);
}

TEST(GradScalerTest, InfiniteGradientsSkipTheStepAndHalveTheScale) {
  GradScaler scaler(true, 2.0, 0.5, /*growth_interval=*/3);
  torch::Tensor w = torch::ones({4}, torch::requires_grad());
  EXPECT_DOUBLE_EQ(scaler.ScaleLoss(torch::tensor(2.0)).item<double>(), 2.0 * 65536);
  scaler.ScaleLoss((w * torch::tensor({1.0f, 2.0f, 3.0f, 4.0f})).sum()).backward();
  EXPECT_TRUE(scaler.Unscale({w}));
  EXPECT_TRUE(torch::allclose(w.grad(), torch::tensor({1.0f, 2.0f, 3.0f, 4.0f})));
  scaler.Update(true);
  EXPECT_EQ(scaler.state().good_steps, 1);

  w.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::infinity(), 0.f, 0.f});
  EXPECT_FALSE(scaler.Unscale({w}));
  scaler.Update(false);
  EXPECT_DOUBLE_EQ(scaler.state().scale, 32768);
  EXPECT_EQ(scaler.state().good_steps, 0);
  w.mutable_grad() = torch::tensor({std::nanf(""), 0.f, 0.f, 0.f});
  EXPECT_FALSE(scaler.Unscale({w}));

  for (int i = 0; i < 3; ++i) scaler.Update(true);
  EXPECT_DOUBLE_EQ(scaler.state().scale, 65536);  // grown after 3 good steps

  GradScaler off(false);
  EXPECT_DOUBLE_EQ(off.ScaleLoss(torch::tensor(2.0)).item<double>(), 2.0);
  w.mutable_grad() = torch::tensor({std::nanf(""), 0.f, 0.f, 0.f});
  EXPECT_TRUE(off.Unscale({w}));  // disabled: no checks, the trainer watches the loss instead
}

TEST(AutocastGuardTest, CpuBf16ScopeCastsConvolutionsAndRestoresWhatWasBefore) {
  torch::Tensor x = torch::randn({1, 3, 8, 8});
  torch::Tensor w = torch::randn({4, 3, 3, 3});
  {
    AutocastGuard outer(true, torch::kBFloat16, torch::kCPU);
    EXPECT_EQ(torch::conv2d(x, w).scalar_type(), torch::kBFloat16);
    {
      AutocastGuard off(false, torch::kBFloat16, torch::kCPU);  // disabled: changes nothing
      EXPECT_EQ(torch::conv2d(x, w).scalar_type(), torch::kBFloat16);
    }
    AutocastGuard cuda(true, torch::kHalf, torch::kCUDA);  // another device's switch
    EXPECT_EQ(torch::conv2d(x, w).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(torch::conv2d(x, w).scalar_type(), torch::kFloat);
  // A bf16 forward stays close to fp32's: bf16 keeps 8 bits of mantissa.
  torch::Tensor reference = torch::conv2d(x, w);
  AutocastGuard guard(true, torch::kBFloat16, torch::kCPU);
  torch::Tensor low = torch::conv2d(x, w).to(torch::kFloat);
  EXPECT_LT((low - reference).abs().max().item<float>(),
            0.05f * reference.abs().max().item<float>());
}

TEST(PrecisionTest, AmpModesOnTheCpu) {
  const torch::Device cpu(torch::kCPU);
  ASSERT_OK_AND_ASSIGN(internal::Precision off, internal::ResolvePrecision(AmpMode::kOff, cpu));
  EXPECT_FALSE(off.autocast);
  EXPECT_EQ(internal::PrecisionName(off), "fp32");

  ASSERT_OK_AND_ASSIGN(internal::Precision bf16, internal::ResolvePrecision(AmpMode::kBf16, cpu));
  EXPECT_TRUE(bf16.autocast);
  EXPECT_EQ(bf16.dtype, torch::kBFloat16);
  EXPECT_EQ(bf16.device_type, torch::kCPU);
  EXPECT_FALSE(bf16.scale_loss);  // bf16 has fp32's range
  EXPECT_EQ(internal::PrecisionName(bf16).rfind("bf16 autocast", 0), 0u);
  EXPECT_EQ(internal::PrecisionName(bf16).find("emulated") != std::string::npos,
            !CpuHasNativeBf16());

  // auto: bf16 where the CPU has bf16 units, fp32 where it would be emulated.
  ASSERT_OK_AND_ASSIGN(internal::Precision chosen, internal::ResolvePrecision(AmpMode::kAuto, cpu));
  EXPECT_EQ(chosen.autocast, CpuHasNativeBf16());
  if (chosen.autocast) {
    EXPECT_EQ(chosen.dtype, torch::kBFloat16);
  }

  auto fp16 = internal::ResolvePrecision(AmpMode::kFp16, cpu);
  EXPECT_STATUS(fp16, StatusCode::kInvalidArgument);
  EXPECT_NE(fp16.status().message().find("amp: bf16"), std::string::npos)
      << fp16.status().message();
}

TEST(PrecisionTest, CpuBf16UnitsMatchWhatTheKernelReports) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string text((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  if (text.find("flags") == std::string::npos) GTEST_SKIP() << "no /proc/cpuinfo flags here";
  const bool listed =
      text.find(" avx512_bf16") != std::string::npos || text.find(" amx_bf16") != std::string::npos;
  EXPECT_EQ(CpuHasNativeBf16(), listed);
}

CheckpointData Checkpoint(int64_t step) {
  CheckpointData cp;
  cp.step = step;
  cp.model.tensors["w"] = models::ToTensorBytes(torch::full({2}, static_cast<float>(step)));
  cp.state.metadata["trainer"] = "{\"step\": " + std::to_string(step) + "}";
  cp.config_text = "seed: 1\n";
  return cp;
}

TEST(CheckpointStoreTest, SavesLoadsAndKeepsTheNewest) {
  auto memory = std::make_shared<storage::MemoryStore>("ckpt");
  CheckpointStore store(memory, "runs/a");
  auto none = store.LatestStep();
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
  EXPECT_STATUS(store.Load(), StatusCode::kNotFound);
  for (int64_t step : {10, 20, 30, 40}) ASSERT_OK(store.Save(Checkpoint(step), 2));
  EXPECT_EQ(*store.Steps(), (std::vector<int64_t>{30, 40}));
  EXPECT_EQ(**store.LatestStep(), 40);
  auto latest = store.Load();
  ASSERT_OK(latest);
  EXPECT_EQ(latest->step, 40);
  EXPECT_EQ(latest->config_text, "seed: 1\n");
  EXPECT_EQ(latest->state.metadata.at("trainer"), "{\"step\": 40}");
  auto w = models::FromTensorBytes(latest->model.tensors.at("w"), "w");
  ASSERT_OK(w);
  EXPECT_EQ(w->index({0}).item<float>(), 40.f);
  EXPECT_OK(store.Load(30));
  EXPECT_FALSE(store.Load(20).ok());
  EXPECT_OK(memory->Head("runs/a/step-0000000040/config.yaml"));
}

TEST(CheckpointStoreTest, ABrokenPointerOrFolderIsDataLoss) {
  auto memory = std::make_shared<storage::MemoryStore>("ckpt-broken");
  CheckpointStore store(memory);
  ASSERT_OK(store.Save(Checkpoint(5), 3));
  ASSERT_OK(memory->Put("latest", "not json"));
  EXPECT_STATUS(store.LatestStep(), StatusCode::kDataLoss);
  ASSERT_OK(memory->Put("latest", "{\"step\": 6}"));  // a pointer ahead of its folder
  EXPECT_STATUS(store.Load(), StatusCode::kDataLoss);
  ASSERT_OK(memory->Put("step-0000000005/state.safetensors", "garbage"));
  EXPECT_FALSE(store.Load(5).ok());
}

TEST(CheckpointStoreTest, EveryFileIsCheckedAgainstItsChecksum) {
  auto memory = std::make_shared<storage::MemoryStore>("ckpt-flip");
  CheckpointStore store(memory);
  ASSERT_OK(store.Save(Checkpoint(7), 3));
  ASSERT_OK(memory->Head("step-0000000007/checksums.json"));
  ASSERT_OK_AND_ASSIGN(std::string model, memory->Get("step-0000000007/model.safetensors"));
  model[model.size() - 1] ^= 0x01;  // one bit of the tensor data: still valid safetensors
  ASSERT_OK(memory->Put("step-0000000007/model.safetensors", model));
  auto loaded = store.Load(7);
  EXPECT_STATUS(loaded, StatusCode::kDataLoss);
  EXPECT_NE(loaded.status().message().find("model.safetensors is corrupt or truncated"),
            std::string::npos)
      << loaded.status().message();
  ASSERT_OK(memory->Put("step-0000000007/config.yaml", "seed: 2\n"));
  ASSERT_OK(store.Save(Checkpoint(8), 3));
  ASSERT_OK(memory->Put("step-0000000008/config.yaml", "seed: 2\n"));
  EXPECT_STATUS(store.Load(8), StatusCode::kDataLoss);
}

TEST(CheckpointStoreTest, PruningLeavesNoEmptyFoldersOnALocalStore) {
  reel::testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto local, storage::LocalStore::Open(dir.path()));
  CheckpointStore store(std::shared_ptr<storage::ObjectStore>(std::move(local)), "run");
  for (int64_t step : {10, 20, 30, 40}) ASSERT_OK(store.Save(Checkpoint(step), 2));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("run/step-0000000010")));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("run/step-0000000020")));
  EXPECT_TRUE(std::filesystem::exists(dir.Join("run/step-0000000040/model.safetensors")));
  EXPECT_EQ(*store.Steps(), (std::vector<int64_t>{30, 40}));
}

// Two shards (a pipeline's stages) and the rest from rank 0: one checkpoint when loaded.
void SaveShardedCheckpoint(CheckpointStore& store, int64_t step, int keep) {
  for (int shard = 0; shard < 2; ++shard) {
    const std::string name = shard == 0 ? "stem.w" : "fc.w";
    models::SafetensorsFile model, state;
    model.tensors[name] =
        models::ToTensorBytes(torch::full({3}, static_cast<float>(step * 10 + shard)));
    state.tensors["optimizer." + name + ".momentum_buffer"] =
        models::ToTensorBytes(torch::full({3}, static_cast<float>(shard)));
    ASSERT_OK(store.SaveShard(step, shard, 2, model, state));
  }
  CheckpointData rest = Checkpoint(step);
  rest.model.tensors.clear();
  ASSERT_OK(store.CommitShards(rest, 2, keep));
}

TEST(CheckpointStoreTest, ShardsWrittenApartLoadAsOneCheckpoint) {
  auto memory = std::make_shared<storage::MemoryStore>("ckpt-sharded");
  CheckpointStore store(memory, "run");
  for (int64_t step : {10, 20, 30}) SaveShardedCheckpoint(store, step, 2);
  EXPECT_EQ(*store.Steps(), (std::vector<int64_t>{20, 30}));
  EXPECT_STATUS(memory->Head("run/step-0000000010/shard-00000-of-00002.model.safetensors"),
                StatusCode::kNotFound);  // pruned, shards and all
  EXPECT_OK(memory->Head("run/step-0000000030/manifest.json"));
  EXPECT_STATUS(memory->Head("run/step-0000000030/model.safetensors"), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(CheckpointData cp, store.Load());
  EXPECT_EQ(cp.step, 30);
  ASSERT_EQ(cp.model.tensors.size(), 2u);
  ASSERT_OK_AND_ASSIGN(torch::Tensor fc,
                       models::FromTensorBytes(cp.model.tensors.at("fc.w"), "fc"));
  EXPECT_EQ(fc[0].item<float>(), 301.F);
  EXPECT_EQ(cp.state.tensors.count("optimizer.stem.w.momentum_buffer"), 1u);
  EXPECT_EQ(cp.state.tensors.count("optimizer.fc.w.momentum_buffer"), 1u);
  EXPECT_EQ(cp.state.metadata.at("trainer"), "{\"step\": 30}");
  EXPECT_EQ(cp.config_text, "seed: 1\n");
}

TEST(CheckpointStoreTest, AMissingOrDamagedShardNeverMakesACheckpoint) {
  auto memory = std::make_shared<storage::MemoryStore>("ckpt-shard-missing");
  CheckpointStore store(memory);
  SaveShardedCheckpoint(store, 4, 3);
  // Step 8: only shard 1 of 2 arrived (its stage died): no manifest, `latest` stays at 4.
  models::SafetensorsFile model, state;
  model.tensors["fc.w"] = models::ToTensorBytes(torch::ones({2}));
  ASSERT_OK(store.SaveShard(8, 1, 2, model, state));
  auto committed = store.CommitShards(Checkpoint(8), 2, 3);
  EXPECT_STATUS(committed, StatusCode::kDataLoss);
  EXPECT_NE(committed.message().find("lacks shard 0 of 2"), std::string::npos)
      << committed.message();
  EXPECT_EQ(**store.LatestStep(), 4);
  EXPECT_EQ(*store.Steps(), (std::vector<int64_t>{4}));
  // A flipped bit in a shard is caught by the checksums the shard wrote.
  const std::string key = "step-0000000004/shard-00001-of-00002.model.safetensors";
  ASSERT_OK_AND_ASSIGN(std::string bytes, memory->Get(key));
  bytes[bytes.size() - 1] ^= 0x01;
  ASSERT_OK(memory->Put(key, bytes));
  auto loaded = store.Load(4);
  EXPECT_STATUS(loaded, StatusCode::kDataLoss);
  EXPECT_NE(loaded.status().message().find("shard-00001-of-00002.model.safetensors is corrupt"),
            std::string::npos)
      << loaded.status().message();
  // Two shards that both hold a tensor: refused rather than one silently winning.
  SaveShardedCheckpoint(store, 12, 3);
  models::SafetensorsFile twice;
  twice.tensors["stem.w"] = models::ToTensorBytes(torch::ones({3}));
  ASSERT_OK(store.SaveShard(12, 1, 2, twice, state));
  ASSERT_OK(store.CommitShards(Checkpoint(12), 2, 3));
  auto doubled = store.Load(12);
  EXPECT_STATUS(doubled, StatusCode::kDataLoss);
  EXPECT_NE(doubled.status().message().find("'stem.w' is in another shard too"), std::string::npos)
      << doubled.status().message();
}

// testdata/checkpoints/release-0.1.0: written by `reel train` of release 0.1.0 (the one before
// checksums and the trainer state codec; testdata/README.md says how). It must keep loading.
TEST(CheckpointStoreTest, ACheckpointOfThePreviousReleaseStillLoadsAndResumes) {
  const std::string root = reel::testing::SourcePath("testdata/checkpoints/release-0.1.0");
  storage::LocalStoreOptions read_only;
  read_only.create_root = false;
  ASSERT_OK_AND_ASSIGN(auto local, storage::LocalStore::Open(root, read_only));
  CheckpointStore store(std::shared_ptr<storage::ObjectStore>(std::move(local)));
  ASSERT_OK_AND_ASSIGN(CheckpointData cp, store.Load());
  EXPECT_EQ(cp.step, 4);
  ASSERT_OK_AND_ASSIGN(TrainerState state,
                       TrainerState::FromJson(cp.state.metadata.at("trainer"), "release-0.1.0"));
  EXPECT_EQ(state.step, 4);
  EXPECT_EQ(state.samples, 8);
  EXPECT_EQ(state.model, "r2plus1d");
  ASSERT_OK_AND_ASSIGN(TrainConfig config, ParseTrainConfigText(cp.config_text, "config.yaml"));
  ASSERT_OK_AND_ASSIGN(torch::nn::AnyModule model, models::BuildModel(config.model));
  EXPECT_OK(models::LoadStateDict(*model.ptr(), cp.model));
  auto optimizer = MakeOptimizer(*model.ptr(), config.optimizer);
  EXPECT_OK(LoadOptimizerState(*optimizer, *model.ptr(), "optimizer.", cp.state));
}

}  // namespace
}  // namespace reel::train
