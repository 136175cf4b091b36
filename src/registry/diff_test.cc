#include "registry/diff.h"

#include <gtest/gtest.h>

#include <cmath>

#include "db/testing/test_database.h"
#include "registry/registry_test_util.h"
#include "registry/tensor_math.h"
#include "testing/status_matchers.h"

namespace reel::registry {
namespace {

class DiffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(auto db, db::Open(database_.Uri()));
    ASSERT_OK_AND_ASSIGN(registry_, Registry::Open(std::move(db), chunks_, ""));
  }
  VersionInfo Add(NewVersion v) {
    v.model = "clf";
    Result<VersionInfo> r = registry_->Register(v, Actor{"ada", true});
    EXPECT_OK(r);
    return r.ok() ? *r : VersionInfo{};
  }
  db::testing::SqliteTestDatabase database_;
  std::shared_ptr<storage::MemoryStore> chunks_ = std::make_shared<storage::MemoryStore>();
  std::unique_ptr<Registry> registry_;
};

TEST_F(DiffTest, NamesEveryKindOfChange) {
  NewVersion a;
  a.weights = Model(1);
  a.architecture = {{"name", "r2plus1d"}, {"num_classes", 8}};
  a.config = "optimizer:\n  name: adamw\n  lr: 0.002\nmodel:\n  layers: [1, 1, 1, 1]\n";
  a.metrics = {{"top1", 0.9}, {"class_names", {"A", "B"}}, {"per_class", {0.8, 1.0}}};
  NewVersion b = a;
  b.weights.tensors["conv.weight"] = Moved(a.weights.tensors["conv.weight"], 0.01, 5);
  b.weights.tensors.erase("fc.weight");
  b.weights.tensors["fc2.weight"] = Floats({4, 16}, 7);
  b.weights.tensors["conv.bias"] = Floats({32}, 8);
  b.architecture["num_classes"] = 4;
  b.config = "optimizer:\n  name: adamw\n  lr: 0.001\nmodel:\n  layers: [1, 1, 1, 1]\n";
  b.metrics = {{"top1", 0.95}, {"class_names", {"A", "B"}}, {"per_class", {0.9, 1.0}}};
  const VersionInfo va = Add(a), vb = Add(b);

  ASSERT_OK_AND_ASSIGN(VersionDiff d, DiffVersions(*registry_, va, vb));
  using Kind = TensorChange::Kind;
  EXPECT_EQ(d.Count(Kind::kUnchanged), 2);  // bn.num_batches_tracked, empty
  EXPECT_EQ(d.Count(Kind::kChanged), 1);
  EXPECT_EQ(d.Count(Kind::kAdded), 1);
  EXPECT_EQ(d.Count(Kind::kRemoved), 1);
  EXPECT_EQ(d.Count(Kind::kShapeChanged), 1);
  for (const TensorChange& t : d.tensors) {
    if (t.name == "conv.weight") {
      EXPECT_EQ(t.kind, Kind::kChanged);
      // Every weight moved by up to 1%, uniformly: the relative L2 distance is about 0.01/sqrt(3).
      EXPECT_NEAR(t.relative_l2, 0.01 / std::sqrt(3.0), 0.001);
    }
    if (t.name == "conv.bias") {
      EXPECT_EQ(t.from, "F32[16]");
      EXPECT_EQ(t.to, "F32[32]");
    }
  }
  ASSERT_EQ(d.config.size(), 1u);
  EXPECT_EQ(d.config[0].key, "optimizer.lr");
  EXPECT_EQ(d.config[0].from, "0.002");
  EXPECT_EQ(d.config[0].to, "0.001");
  ASSERT_EQ(d.architecture.size(), 1u);
  EXPECT_EQ(d.architecture[0].key, "num_classes");
  ASSERT_EQ(d.metrics.size(), 2u);
  EXPECT_EQ(d.metrics[0].key, "per_class.A");
  EXPECT_EQ(d.metrics[1].key, "top1");
  const nlohmann::json j = d.ToJson();
  EXPECT_EQ(j["a"], "models:/clf/1");
  EXPECT_EQ(j["tensors"].size(), 6u);
}

TEST_F(DiffTest, AVersionAgainstItselfHasNoChangesAndReadsNoChunks) {
  NewVersion a;
  a.weights = Model(1);
  const VersionInfo va = Add(a);
  const uint64_t before = chunks_->request_count();
  ASSERT_OK_AND_ASSIGN(VersionDiff d, DiffVersions(*registry_, va, va));
  EXPECT_EQ(d.Count(TensorChange::Kind::kUnchanged), static_cast<int>(d.tensors.size()));
  EXPECT_TRUE(d.config.empty() && d.metrics.empty() && d.architecture.empty());
  EXPECT_EQ(chunks_->request_count(), before);
}

TEST(TensorMath, HalfPrecisionRoundTripsAndRounds) {
  const std::vector<double> exact = {0.0, 1.0, -2.5, 65504.0, 0.000061035156250, 5.96046e-08};
  for (const char* dtype : {"F16", "BF16", "F32", "F64"}) {
    ASSERT_OK_AND_ASSIGN(models::TensorBytes t, FromDoubles({1.0, -2.5, 0.0}, dtype, {3}));
    ASSERT_OK_AND_ASSIGN(std::vector<double> back, ToDoubles(t));
    EXPECT_EQ(back, (std::vector<double>{1.0, -2.5, 0.0})) << dtype;
  }
  ASSERT_OK_AND_ASSIGN(models::TensorBytes h, FromDoubles(exact, "F16", {6}));
  ASSERT_OK_AND_ASSIGN(std::vector<double> hb, ToDoubles(h));
  for (size_t i = 0; i < exact.size(); ++i) EXPECT_NEAR(hb[i], exact[i], 1e-9) << i;
  ASSERT_OK_AND_ASSIGN(models::TensorBytes big, FromDoubles({1e6, 1.0 + 1.0 / 4096}, "F16", {2}));
  ASSERT_OK_AND_ASSIGN(std::vector<double> bb, ToDoubles(big));
  EXPECT_TRUE(std::isinf(bb[0]));
  EXPECT_EQ(bb[1], 1.0) << "half way between two halves rounds to the even one";
  ASSERT_OK_AND_ASSIGN(models::TensorBytes i8, FromDoubles({300, -300, 2.5, -1.4}, "I8", {4}));
  ASSERT_OK_AND_ASSIGN(std::vector<double> ib, ToDoubles(i8));
  EXPECT_EQ(ib, (std::vector<double>{127, -128, 2, -1}));
  EXPECT_STATUS(FromDoubles({1}, "F8", {1}), StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(RelativeL2({3, 4}, {3, 4}), 0);
  EXPECT_DOUBLE_EQ(RelativeL2({3, 4}, {0, 0}), 1);
  EXPECT_DOUBLE_EQ(RelativeL2({0, 0}, {3, 4}), 5);
}

}  // namespace
}  // namespace reel::registry
