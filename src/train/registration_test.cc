#include "train/registration.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/hash.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::train {
namespace {

using reel::testing::TempDir;

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class RegistrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dataset = dir_.path() + "/ds";
    std::filesystem::create_directories(dataset);
    WriteFile(dataset + "/manifest.json", "{\"format\": \"reel-dataset\"}");
    config_ =
        "model:\n  name: r2plus1d\n  num_classes: 8\n  width: 16\n  layers: [1, 1, 1, 1]\n"
        "data:\n  dataset: " +
        dataset + "\n";
    CheckpointData cp;
    cp.step = 120;
    cp.model.tensors["fc.weight"] = {"F32", {2}, std::string(8, '\1')};
    cp.state.tensors["opt.exp_avg"] = {"F32", {2}, std::string(8, '\2')};
    cp.state.metadata["trainer"] = "{\"step\": 120}";
    cp.config_text = config_;
    run_ = dir_.path() + "/run";
    ASSERT_OK_AND_ASSIGN(CheckpointStore store, CheckpointStore::Open(run_ + "/checkpoints"));
    ASSERT_OK(store.Save(cp, 2));
    WriteFile(run_ + "/eval.json",
              "{\"top1\": 0.97, \"class_names\": [\"A\"], \"predictions\": [{\"video\": \"v\"}]}");
  }
  TempDir dir_;
  std::string config_, run_;
};

TEST_F(RegistrationTest, ARunDirectoryGivesItsLatestCheckpointAndReport) {
  ASSERT_OK_AND_ASSIGN(registry::NewVersion v, VersionFromPath(run_, {"", true}));
  EXPECT_EQ(v.weights.tensors.at("fc.weight").data, std::string(8, '\1'));
  ASSERT_TRUE(v.optimizer.has_value());
  EXPECT_EQ(v.optimizer->tensors.count("opt.exp_avg"), 1u);
  EXPECT_EQ(v.architecture["name"], "r2plus1d");
  EXPECT_EQ(v.architecture["layers"], nlohmann::json::array({1, 1, 1, 1}));
  EXPECT_EQ(v.config, config_);
  EXPECT_EQ(v.metrics["top1"], 0.97);
  EXPECT_FALSE(v.metrics.contains("predictions"));
  EXPECT_EQ(v.dataset_uri, dir_.path() + "/ds");
  EXPECT_EQ(v.dataset_hash, Sha256Hex("{\"format\": \"reel-dataset\"}"));
  EXPECT_EQ(v.recipe["step"], 120);
  EXPECT_FALSE(v.code_commit.empty());
}

TEST_F(RegistrationTest, ACheckpointStoreOrOneFolderWork) {
  ASSERT_OK_AND_ASSIGN(registry::NewVersion store, VersionFromPath(run_ + "/checkpoints"));
  EXPECT_FALSE(store.optimizer.has_value());
  EXPECT_TRUE(store.metrics.empty());  // no run directory, no report
  ASSERT_OK_AND_ASSIGN(registry::NewVersion folder,
                       VersionFromPath(run_ + "/checkpoints/step-0000000120/"));
  EXPECT_EQ(folder.recipe["step"], 120);
}

TEST_F(RegistrationTest, ASafetensorsFileNeedsAConfigWithAModelSection) {
  const std::string file = run_ + "/checkpoints/step-0000000120/model.safetensors";
  EXPECT_STATUS(VersionFromPath(file), StatusCode::kInvalidArgument);
  const std::string no_model = dir_.path() + "/other.yaml";
  WriteFile(no_model, "seed: 1\n");
  EXPECT_STATUS(VersionFromPath(file, {no_model, false}), StatusCode::kInvalidArgument);
  const std::string config = dir_.path() + "/c.yaml";
  WriteFile(config, config_);
  ASSERT_OK_AND_ASSIGN(registry::NewVersion v, VersionFromPath(file, {config, false}));
  EXPECT_EQ(v.architecture["num_classes"], 8);
  EXPECT_EQ(v.recipe["source"], file);
}

TEST_F(RegistrationTest, BadPathsAndDamagedFilesAreClearErrors) {
  EXPECT_STATUS(VersionFromPath(dir_.path() + "/missing"), StatusCode::kNotFound);
  EXPECT_STATUS(VersionFromPath(dir_.path() + "/ds"), StatusCode::kInvalidArgument);
  EXPECT_STATUS(VersionFromPath(dir_.path() + "/ds/manifest.json"), StatusCode::kInvalidArgument);
  const std::string truncated = dir_.path() + "/t.safetensors";
  WriteFile(truncated, "\x10\0\0\0");
  const std::string config = dir_.path() + "/c.yaml";
  WriteFile(config, config_);
  EXPECT_STATUS(VersionFromPath(truncated, {config, false}), StatusCode::kDataLoss);
  WriteFile(run_ + "/checkpoints/step-0000000120/model.safetensors", "garbage");
  EXPECT_STATUS(VersionFromPath(run_), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace reel::train
