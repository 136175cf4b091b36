#include "registry/merge.h"

#include <gtest/gtest.h>

#include <cmath>

#include "db/testing/test_database.h"
#include "registry/registry_test_util.h"
#include "registry/tensor_math.h"
#include "testing/status_matchers.h"

namespace reel::registry {
namespace {

std::vector<double> Values(const SafetensorsFile& f, const std::string& name) {
  auto v = ToDoubles(f.tensors.at(name));
  EXPECT_OK(v);
  return v.ok() ? *v : std::vector<double>{};
}

TensorBytes FromValues(const std::vector<double>& v, std::vector<int64_t> shape) {
  auto t = FromDoubles(v, "F32", std::move(shape));
  EXPECT_OK(t);
  return t.ok() ? *t : TensorBytes{};
}

class MergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(auto db, db::Open(database_.Uri()));
    ASSERT_OK_AND_ASSIGN(registry_, Registry::Open(std::move(db), chunks_, ""));
  }
  VersionInfo Add(SafetensorsFile weights, std::vector<VersionId> parents,
                  nlohmann::json arch = {{"name", "toy"}}) {
    NewVersion v;
    v.model = "clf";
    v.weights = std::move(weights);
    v.parents = std::move(parents);
    v.architecture = std::move(arch);
    Result<VersionInfo> r = registry_->Register(v, kRoot);
    EXPECT_OK(r);
    return r.ok() ? *r : VersionInfo{};
  }
  SafetensorsFile Pull(const VersionInfo& v) {
    auto f = registry_->PullWeights(v);
    EXPECT_OK(f);
    return f.ok() ? *f : SafetensorsFile{};
  }
  db::testing::SqliteTestDatabase database_;
  std::shared_ptr<storage::MemoryStore> chunks_ = std::make_shared<storage::MemoryStore>();
  std::unique_ptr<Registry> registry_;
};

TEST_F(MergeTest, ATensorChangedOnOneSideTakesThatSide) {
  const SafetensorsFile base = Model(1);
  const VersionInfo v1 = Add(base, {});
  SafetensorsFile a = base, b = base;
  a.tensors["conv.weight"] = Moved(base.tensors.at("conv.weight"), 0.01, 2);
  b.tensors["fc.weight"] = Moved(base.tensors.at("fc.weight"), 0.01, 3);
  b.tensors["extra"] = Floats({3}, 4);
  const VersionInfo va = Add(a, {v1.id}), vb = Add(b, {v1.id});
  ASSERT_OK_AND_ASSIGN(MergeOutcome m, MergeVersions(*registry_, va, vb, {}));
  EXPECT_EQ(m.conflicts, 0);
  ASSERT_TRUE(m.base.has_value());
  EXPECT_EQ(m.base->ToString(), "models:/clf/1");
  EXPECT_EQ(m.weights.tensors.at("conv.weight").data, a.tensors.at("conv.weight").data);
  EXPECT_EQ(m.weights.tensors.at("fc.weight").data, b.tensors.at("fc.weight").data);
  EXPECT_EQ(m.weights.tensors.at("extra").data, b.tensors.at("extra").data);
  EXPECT_EQ(m.weights.tensors.at("conv.bias").data, base.tensors.at("conv.bias").data);
  EXPECT_EQ(m.recipe["op"], "merge");
  EXPECT_EQ(m.recipe["tensors"]["theirs"], 2);
}

TEST_F(MergeTest, ConflictsNeedAStrategyAndEachComputesWhatItSays) {
  SafetensorsFile base;
  base.tensors["w"] = FromValues({1, 1, 1, 1}, {4});
  SafetensorsFile a = base, b = base;
  a.tensors["w"] = FromValues({3, 1, 0, 2}, {4});
  b.tensors["w"] = FromValues({1, 5, -1, 0.5}, {4});
  const VersionInfo v1 = Add(base, {});
  const VersionInfo va = Add(a, {v1.id}), vb = Add(b, {v1.id});

  Result<MergeOutcome> refused = MergeVersions(*registry_, va, vb, {});
  EXPECT_STATUS(refused, StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("w"), std::string::npos);

  auto merged = [&](MergeOptions o) {
    Result<MergeOutcome> m = MergeVersions(*registry_, va, vb, o);
    EXPECT_OK(m);
    return m.ok() ? Values(m->weights, "w") : std::vector<double>{};
  };
  EXPECT_EQ(merged({MergeStrategy::kOurs}), (std::vector<double>{3, 1, 0, 2}));
  EXPECT_EQ(merged({MergeStrategy::kTheirs}), (std::vector<double>{1, 5, -1, 0.5}));
  EXPECT_EQ(merged({MergeStrategy::kAverage, 0.25}), (std::vector<double>{2.5, 2, -0.25, 1.625}));
  // base + (a - base) + (b - base)
  EXPECT_EQ(merged({MergeStrategy::kTaskArithmetic}), (std::vector<double>{3, 5, -2, 1.5}));
  // TIES, density 0.5: a's change (2, 0, -1, 1) keeps 2 and one of the 1s (-1
  // and 1 tie: the first is kept), b's (0, 4, -2, -0.5) keeps 4 and -2. Elected
  // signs: +, +, -, +. Means of the agreeing kept changes: 2, 4, (-1 - 2) / 2,
  // 0 (b's -0.5 was trimmed, a's 1 was not kept).
  MergeOptions ties{MergeStrategy::kTies};
  ties.density = 0.5;
  EXPECT_EQ(merged(ties), (std::vector<double>{3, 5, -0.5, 1}));
}

TEST_F(MergeTest, DifferentArchitecturesAndShapesAreRefusedFirst) {
  const VersionInfo v1 = Add(Model(1), {});
  const VersionInfo other = Add(Model(1), {}, {{"name", "r3d"}});
  Result<MergeOutcome> m = MergeVersions(*registry_, v1, other, {MergeStrategy::kAverage});
  EXPECT_STATUS(m, StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("across architectures"), std::string::npos);
  SafetensorsFile wide = Model(1);
  wide.tensors["fc.weight"] = Floats({9, 16}, 5);
  const VersionInfo reshaped = Add(wide, {v1.id});
  SafetensorsFile moved = Model(1);
  moved.tensors["fc.weight"] = Moved(moved.tensors["fc.weight"], 0.1, 6);
  const VersionInfo changed = Add(moved, {v1.id});
  EXPECT_STATUS(MergeVersions(*registry_, reshaped, changed, {MergeStrategy::kAverage}),
                StatusCode::kInvalidArgument);
  ASSERT_OK(MergeVersions(*registry_, reshaped, changed, {MergeStrategy::kOurs}));
  EXPECT_STATUS(ParseMergeStrategy("mean"), StatusCode::kInvalidArgument);
}

TEST_F(MergeTest, TheCommonAncestorIsTheNearestOne) {
  auto lca = [&](const VersionInfo& a, const VersionInfo& b) -> int64_t {
    Result<std::optional<VersionId>> r = LowestCommonAncestor(*registry_, a.id, b.id);
    EXPECT_OK(r);
    return r.ok() && r->has_value() ? r->value().version : 0;
  };
  const VersionInfo v1 = Add(Model(1), {});
  const VersionInfo v2 = Add(Model(2), {v1.id}), v3 = Add(Model(3), {v2.id});
  const VersionInfo v4 = Add(Model(4), {v1.id}), v5 = Add(Model(5), {v4.id});
  EXPECT_EQ(lca(v3, v5), 1);
  const VersionInfo v6 = Add(Model(6), {v3.id, v5.id});  // a merge
  const VersionInfo v7 = Add(Model(7), {v6.id});
  EXPECT_EQ(lca(v7, v5), 5);
  EXPECT_EQ(lca(v7, v7), 7);
  const VersionInfo alone = Add(Model(8), {});
  EXPECT_EQ(lca(v7, alone), 0) << "no common ancestor";
}

TEST_F(MergeTest, RebaseReplaysTheTipsChangeOntoTheNewBase) {
  SafetensorsFile old_base;
  old_base.tensors["w"] = FromValues({1, 2}, {2});
  old_base.tensors["v"] = FromValues({0, 0}, {2});
  SafetensorsFile tip = old_base, next = old_base;
  tip.tensors["w"] = FromValues({2, 2}, {2});   // the branch's change
  next.tensors["w"] = FromValues({1, 5}, {2});  // the new base changed it too
  next.tensors["v"] = FromValues({7, 7}, {2});  // and this one only
  const VersionInfo vo = Add(old_base, {}), vt = Add(tip, {vo.id}), vn = Add(next, {vo.id});
  ASSERT_OK_AND_ASSIGN(MergeOutcome r, RebaseVersion(*registry_, vt, vo, vn));
  EXPECT_EQ(Values(r.weights, "w"), (std::vector<double>{2, 5}));  // new + (tip - old)
  EXPECT_EQ(Values(r.weights, "v"), (std::vector<double>{7, 7}));
  EXPECT_EQ(r.recipe["op"], "rebase");
  EXPECT_EQ(r.recipe["old_base"], "models:/clf/1");
}

// Merging two fine-tunes of one parent on different classes keeps most of both
// skills: a softmax classifier over 16 features for 8 classes, pre-trained
// briefly on all classes, fine-tuned on classes 0-3 (A) and on 4-7 (B) by plain
// gradient descent. Each fine-tune forgets the other's classes; the merge keeps
// each side's own classes close to that side's accuracy.
class Classifier {
 public:
  static constexpr int kClasses = 8, kDims = 16;
  std::vector<double> w = std::vector<double>(kClasses * kDims, 0.0);

  struct Data {
    std::vector<std::vector<double>> x;
    std::vector<int> y;
  };

  static Data Sample(int first, int last, int per_class, uint64_t seed) {
    Rng means(42), noise(seed);
    auto normal = [](Rng& r) {
      return std::sqrt(-2 * std::log(1 - r.Uniform())) * std::cos(2 * M_PI * r.Uniform());
    };
    std::vector<std::vector<double>> mu(kClasses, std::vector<double>(kDims));
    for (auto& m : mu) {
      for (double& v : m) v = 1.5 * normal(means);
    }
    Data d;
    for (int c = first; c <= last; ++c) {
      for (int i = 0; i < per_class; ++i) {
        std::vector<double> x(kDims);
        for (int k = 0; k < kDims; ++k) x[k] = mu[c][k] + normal(noise);
        d.x.push_back(std::move(x));
        d.y.push_back(c);
      }
    }
    return d;
  }

  std::vector<double> Logits(const std::vector<double>& x) const {
    std::vector<double> z(kClasses, 0.0);
    for (int c = 0; c < kClasses; ++c) {
      for (int k = 0; k < kDims; ++k) z[c] += w[c * kDims + k] * x[k];
    }
    return z;
  }

  void Train(const Data& d, int steps, double lr) {
    for (int s = 0; s < steps; ++s) {
      std::vector<double> grad(w.size(), 0.0);
      for (size_t i = 0; i < d.x.size(); ++i) {
        std::vector<double> z = Logits(d.x[i]);
        const double top = *std::max_element(z.begin(), z.end());
        double sum = 0;
        for (double& v : z) sum += (v = std::exp(v - top));
        for (int c = 0; c < kClasses; ++c) {
          const double g = z[c] / sum - (c == d.y[i] ? 1 : 0);
          for (int k = 0; k < kDims; ++k) grad[c * kDims + k] += g * d.x[i][k];
        }
      }
      for (size_t j = 0; j < w.size(); ++j) w[j] -= lr * grad[j] / d.x.size();
    }
  }

  double Accuracy(const Data& d) const {
    int right = 0;
    for (size_t i = 0; i < d.x.size(); ++i) {
      const std::vector<double> z = Logits(d.x[i]);
      right += std::max_element(z.begin(), z.end()) - z.begin() == d.y[i];
    }
    return static_cast<double>(right) / d.x.size();
  }
};

TEST_F(MergeTest, MergingTwoFineTunesOnDifferentClassesKeepsMostOfBothSkills) {
  using C = Classifier;
  const C::Data all = C::Sample(0, 7, 40, 1), first = C::Sample(0, 3, 40, 2),
                second = C::Sample(4, 7, 40, 3);
  const C::Data test_first = C::Sample(0, 3, 200, 4), test_second = C::Sample(4, 7, 200, 5);
  C parent;
  parent.Train(all, 3,
               0.05);  // a weak start, as a pre-trained model is for new classes
  C a = parent, b = parent;
  a.Train(first, 150, 0.05);
  b.Train(second, 150, 0.05);
  auto file = [](const C& c) {
    SafetensorsFile f;
    f.tensors["fc.weight"] = FromValues(c.w, {C::kClasses, C::kDims});
    return f;
  };
  const VersionInfo vp = Add(file(parent), {});
  const VersionInfo va = Add(file(a), {vp.id}), vb = Add(file(b), {vp.id});
  const double a_own = a.Accuracy(test_first), b_own = b.Accuracy(test_second);
  ASSERT_GT(a_own, 0.9);
  ASSERT_GT(b_own, 0.9);
  ASSERT_LT(a.Accuracy(test_second), 0.5) << "fine-tuning on 0-3 forgets 4-7";
  ASSERT_LT(b.Accuracy(test_first), 0.5);

  for (MergeStrategy s :
       {MergeStrategy::kAverage, MergeStrategy::kTaskArithmetic, MergeStrategy::kTies}) {
    MergeOptions o{s};
    o.density = 0.5;
    ASSERT_OK_AND_ASSIGN(MergeOutcome m, MergeVersions(*registry_, va, vb, o));
    C merged;
    merged.w = Values(m.weights, "fc.weight");
    const double kept_a = merged.Accuracy(test_first) / a_own;
    const double kept_b = merged.Accuracy(test_second) / b_own;
    std::printf("%-16s classes 0-3: %.3f of A's %.3f, classes 4-7: %.3f of B's %.3f\n",
                std::string(MergeStrategyName(s)).c_str(), kept_a, a_own, kept_b, b_own);
    EXPECT_GT(kept_a, 0.8) << MergeStrategyName(s);
    EXPECT_GT(kept_b, 0.8) << MergeStrategyName(s);
  }
}

}  // namespace
}  // namespace reel::registry
