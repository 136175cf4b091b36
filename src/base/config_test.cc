#include "base/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel {
namespace {

// Line numbers in the expectations below refer to this text.
constexpr char kTrain[] =
    "model:\n"                        // 1
    "  name: resnet\n"                // 2
    "  depth: 50\n"                   // 3
    "optimizer:\n"                    // 4
    "  lr: fast\n"                    // 5
    "  momentum: 0.9\n"               // 6
    "  nesterov: yes\n"               // 7
    "  steps: 12abc\n"                // 8
    "  warmup: 1.5\n"                 // 9
    "  huge: 99999999999999999999\n"  // 10
    "  flag: maybe\n"                 // 11
    "layers:\n"                       // 12
    "  - width: 64\n"                 // 13
    "  - width: 128\n"                // 14
    "  - width: wide\n"               // 15
    "data:\n";                        // 16

ConfigNode Load(const char* text = kTrain) {
  auto config = ConfigNode::LoadString(text, "train.yaml");
  EXPECT_OK(config);
  return std::move(config).value();
}

ConfigNode ChildOf(const ConfigNode& node, const char* key) {
  auto child = node.Child(key);
  EXPECT_OK(child);
  return std::move(child).value();
}

TEST(ConfigTest, ReadsTypedValues) {
  ConfigNode root = Load();
  ConfigNode model = ChildOf(root, "model");
  EXPECT_EQ(*model.GetString("name"), "resnet");
  EXPECT_EQ(*model.GetInt("depth"), 50);
  ConfigNode optimizer = ChildOf(root, "optimizer");
  EXPECT_DOUBLE_EQ(*optimizer.GetDouble("momentum"), 0.9);
  EXPECT_TRUE(*optimizer.GetBool("nesterov"));
  EXPECT_EQ(model.path(), "model");
}

TEST(ConfigTest, KeysInFileOrder) {
  ConfigNode root = Load();
  EXPECT_EQ(root.Keys(), (std::vector<std::string>{"model", "optimizer", "layers", "data"}));
  EXPECT_TRUE(root.IsMap());
  EXPECT_TRUE(root.Has("layers"));
  EXPECT_FALSE(root.Has("optimiser"));
}

TEST(ConfigTest, FlattensToDottedKeys) {
  ASSERT_OK_AND_ASSIGN(ConfigNode root,
                       ConfigNode::LoadString("model: {name: r2plus1d, layers: [1, 2]}\n"
                                              "tasks:\n  - {name: a}\n  - {name: b, cpu: 2}\n"
                                              "empty: {}\nnothing:\n",
                                              "f.yaml"));
  const std::map<std::string, std::string> flat = root.Flatten();
  const std::map<std::string, std::string> expected = {{"model.name", "r2plus1d"},
                                                       {"model.layers", "[1, 2]"},
                                                       {"tasks[0].name", "a"},
                                                       {"tasks[1].name", "b"},
                                                       {"tasks[1].cpu", "2"},
                                                       {"empty", "{}"},
                                                       {"nothing", "~"}};
  EXPECT_EQ(flat, expected);
  ASSERT_OK_AND_ASSIGN(ConfigNode model, root.Child("model"));
  EXPECT_EQ(model.Flatten().count("model.name"), 1u);  // keys keep the node's path
}

TEST(ConfigTest, NonNumberNamesFileLineColumnAndKey) {
  ConfigNode optimizer = ChildOf(Load(), "optimizer");
  auto lr = optimizer.GetDouble("lr");
  ASSERT_FALSE(lr.ok());
  EXPECT_STATUS(lr, StatusCode::kInvalidArgument);
  EXPECT_EQ(lr.status().message(),
            "train.yaml:5:7: key 'optimizer.lr': expected a number, got 'fast'");
}

TEST(ConfigTest, GetIntRejectsTrailingGarbage) {
  auto steps = ChildOf(Load(), "optimizer").GetInt("steps");
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().message(),
            "train.yaml:8:10: key 'optimizer.steps': expected an integer, got '12abc'");
}

TEST(ConfigTest, GetIntRejectsFloat) {
  auto warmup = ChildOf(Load(), "optimizer").GetInt("warmup");
  ASSERT_FALSE(warmup.ok());
  EXPECT_EQ(warmup.status().message(),
            "train.yaml:9:11: key 'optimizer.warmup': expected an integer, got '1.5'");
  // The same value is a fine double.
  EXPECT_DOUBLE_EQ(*ChildOf(Load(), "optimizer").GetDouble("warmup"), 1.5);
}

TEST(ConfigTest, GetIntRejectsOutOfRange) {
  auto huge = ChildOf(Load(), "optimizer").GetInt("huge");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(
      huge.status().message(),
      "train.yaml:10:9: key 'optimizer.huge': integer '99999999999999999999' is out of range");
}

TEST(ConfigTest, IntegerEdgeCases) {
  ConfigNode root = Load(
      "max: 9223372036854775807\nmin: -9223372036854775808\nplus: +7\nneg: -3\n"
      "quoted: '12'\nspace: '1 2'\nempty: ''\nsign: '+-1'\nhex: 0x10\n");
  EXPECT_EQ(*root.GetInt("max"), INT64_MAX);
  EXPECT_EQ(*root.GetInt("min"), INT64_MIN);
  EXPECT_EQ(*root.GetInt("plus"), 7);
  EXPECT_EQ(*root.GetInt("neg"), -3);
  EXPECT_EQ(*root.GetInt("quoted"), 12);
  EXPECT_FALSE(root.GetInt("space").ok());
  EXPECT_FALSE(root.GetInt("empty").ok());
  EXPECT_FALSE(root.GetInt("sign").ok());
  EXPECT_FALSE(root.GetInt("hex").ok());
}

TEST(ConfigTest, Doubles) {
  ConfigNode root =
      Load("a: 1e-3\nb: -2\nc: .inf\nd: -.Inf\ne: .nan\nf: 1.5x\ng: 1e999\nh: +2.5\n");
  EXPECT_DOUBLE_EQ(*root.GetDouble("a"), 1e-3);
  EXPECT_DOUBLE_EQ(*root.GetDouble("b"), -2);
  EXPECT_TRUE(std::isinf(*root.GetDouble("c")) && *root.GetDouble("c") > 0);
  EXPECT_TRUE(std::isinf(*root.GetDouble("d")) && *root.GetDouble("d") < 0);
  EXPECT_TRUE(std::isnan(*root.GetDouble("e")));
  EXPECT_EQ(root.GetDouble("f").status().message(),
            "train.yaml:6:4: key 'f': expected a number, got '1.5x'");
  EXPECT_EQ(root.GetDouble("g").status().message(),
            "train.yaml:7:4: key 'g': number '1e999' is out of range");
  EXPECT_DOUBLE_EQ(*root.GetDouble("h"), 2.5);
}

TEST(ConfigTest, Booleans) {
  ConfigNode root = Load("a: true\nb: false\nc: yes\nd: no\ne: True\nf: NO\ng: 1\nh: on\n");
  EXPECT_TRUE(*root.GetBool("a"));
  EXPECT_FALSE(*root.GetBool("b"));
  EXPECT_TRUE(*root.GetBool("c"));
  EXPECT_FALSE(*root.GetBool("d"));
  EXPECT_TRUE(*root.GetBool("e"));
  EXPECT_FALSE(*root.GetBool("f"));
  EXPECT_FALSE(root.GetBool("g").ok());
  EXPECT_FALSE(root.GetBool("h").ok());
}

TEST(ConfigTest, BadBooleanMessage) {
  auto flag = ChildOf(Load(), "optimizer").GetBool("flag");
  ASSERT_FALSE(flag.ok());
  EXPECT_EQ(flag.status().message(),
            "train.yaml:11:9: key 'optimizer.flag': expected a boolean (true, false, yes or no), "
            "got 'maybe'");
}

TEST(ConfigTest, MissingRequiredKeyIsNotFoundWithDottedPath) {
  ConfigNode model = ChildOf(Load(), "model");
  auto width = model.GetInt("width");
  ASSERT_FALSE(width.ok());
  EXPECT_STATUS(width, StatusCode::kNotFound);
  // Points at the map the key is missing from.
  EXPECT_EQ(width.status().message(), "train.yaml:2:3: key 'model.width': required key is missing");
}

TEST(ConfigTest, OptionalReadsFallBackOnlyWhenAbsent) {
  ConfigNode optimizer = ChildOf(Load(), "optimizer");
  EXPECT_EQ(*optimizer.GetInt("epochs", 10), 10);
  EXPECT_EQ(*optimizer.GetString("schedule", "cosine"), "cosine");
  EXPECT_DOUBLE_EQ(*optimizer.GetDouble("decay", 0.5), 0.5);
  EXPECT_FALSE(*optimizer.GetBool("amsgrad", false));
  EXPECT_DOUBLE_EQ(*optimizer.GetDouble("momentum", 0.1), 0.9);  // present: the file wins
  auto lr = optimizer.GetDouble("lr", 0.1);
  ASSERT_FALSE(lr.ok());  // present but malformed is still an error
  EXPECT_EQ(lr.status().message(),
            "train.yaml:5:7: key 'optimizer.lr': expected a number, got 'fast'");
}

TEST(ConfigTest, NullSectionActsAsEmptyMap) {
  ConfigNode data = ChildOf(Load(), "data");
  EXPECT_TRUE(data.IsNull());
  EXPECT_EQ(*data.GetInt("workers", 4), 4);
  EXPECT_OK(data.CheckKeys({"workers"}));
  EXPECT_STATUS(data.GetInt("workers"), StatusCode::kNotFound);
  EXPECT_TRUE(data.Elements()->empty());
}

TEST(ConfigTest, SequencePathsUseIndices) {
  ConfigNode layers = ChildOf(Load(), "layers");
  ASSERT_TRUE(layers.IsSequence());
  auto elements = layers.Elements();
  ASSERT_OK(elements);
  ASSERT_EQ(elements->size(), 3u);
  EXPECT_EQ((*elements)[1].path(), "layers[1]");
  EXPECT_EQ(*(*elements)[1].GetInt("width"), 128);
  auto width = (*elements)[2].GetInt("width");
  ASSERT_FALSE(width.ok());
  EXPECT_EQ(width.status().message(),
            "train.yaml:15:12: key 'layers[2].width': expected an integer, got 'wide'");
}

TEST(ConfigTest, NestedSequencesInRootSequence) {
  ConfigNode root = Load("- [1, 2]\n- [3, x]\n");
  auto outer = root.Elements();
  ASSERT_OK(outer);
  auto inner = (*outer)[1].Elements();
  ASSERT_OK(inner);
  EXPECT_EQ((*inner)[1].path(), "[1][1]");
  EXPECT_EQ(*(*inner)[0].AsInt(), 3);
  EXPECT_EQ((*inner)[1].AsInt().status().message(),
            "train.yaml:2:7: key '[1][1]': expected an integer, got 'x'");
}

TEST(ConfigTest, CheckKeysNamesUnknownKeyAndAllowedOnes) {
  ConfigNode root = Load("model: {}\noptimiser:\n  lr: 1\n");
  Status s = root.CheckKeys({"model", "optimizer", "data"});
  EXPECT_STATUS(s, StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "train.yaml:2:1: unknown key 'optimiser' (expected one of: model, optimizer, data)");
  EXPECT_OK(root.CheckKeys({"optimiser", "model"}));
}

TEST(ConfigTest, CheckKeysUsesDottedPathInNestedMap) {
  ConfigNode model = ChildOf(Load(), "model");
  Status s = model.CheckKeys({"name"});
  EXPECT_EQ(s.message(), "train.yaml:3:3: unknown key 'model.depth' (expected one of: name)");
  EXPECT_EQ(model.CheckKeys({}).message(),
            "train.yaml:2:3: unknown key 'model.name' (no keys are allowed here)");
}

TEST(ConfigTest, WrongNodeKinds) {
  ConfigNode root = Load();
  auto model_as_int = root.GetInt("model");
  EXPECT_EQ(model_as_int.status().message(),
            "train.yaml:2:3: key 'model': expected an integer, got a map");
  ConfigNode layers = ChildOf(root, "layers");
  EXPECT_EQ(layers.Child("x").status().message(),
            "train.yaml:13:3: key 'layers': expected a map, got a sequence");
  EXPECT_STATUS(layers.CheckKeys({"x"}), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.GetString("layers").status().message(),
            "train.yaml:13:3: key 'layers': expected a string, got a sequence");
  EXPECT_EQ(ChildOf(root, "model").Elements().status().message(),
            "train.yaml:2:3: key 'model': expected a sequence, got a map");
  EXPECT_STATUS(root.GetString("data"), StatusCode::kInvalidArgument);
}

TEST(ConfigTest, SyntaxErrorHasFileLineColumnAndYamlMessage) {
  auto config = ConfigNode::LoadString("a: 1\nb:\n  c: [1, 2\n", "bad.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_STATUS(config, StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(), "bad.yaml:4:1: end of sequence flow not found");

  auto indent = ConfigNode::LoadString("a: 1\n  b: 2\n", "indent.yaml");
  ASSERT_FALSE(indent.ok());
  EXPECT_EQ(indent.status().message(), "indent.yaml:2:4: illegal map value");
}

TEST(ConfigTest, DefaultSourceNameAndRootWhere) {
  auto config = ConfigNode::LoadString("x: [");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message().rfind("<string>:1:", 0), 0u) << config.status().message();
  ConfigNode root = Load("a: 1\n");
  EXPECT_EQ(root.Where(), "train.yaml:1:1");
  EXPECT_EQ(root.Error("boom").message(), "train.yaml:1:1: boom");
  ConfigNode empty = Load("");
  EXPECT_TRUE(empty.IsNull());
  EXPECT_EQ(empty.Where(), "train.yaml");
}

TEST(ConfigTest, LoadFileUsesPathInMessages) {
  reel::testing::TempDir dir_template_owner;
  const std::string dir_template = dir_template_owner.path();
  const std::string path = std::string(dir_template) + "/train.yaml";
  {
    std::ofstream out(path);
    out << "epochs: 3\nlr: x\n";
  }
  auto config = ConfigNode::LoadFile(path);
  ASSERT_OK(config);
  EXPECT_EQ(*config->GetInt("epochs"), 3);
  EXPECT_EQ(config->GetDouble("lr").status().message(),
            path + ":2:5: key 'lr': expected a number, got 'x'");

  auto missing = ConfigNode::LoadFile(std::string(dir_template) + "/nope.yaml");
  EXPECT_STATUS(missing, StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.yaml"), std::string::npos);

  auto directory = ConfigNode::LoadFile(dir_template);
  EXPECT_FALSE(directory.ok());
}

TEST(ConfigTest, ConcurrentReadsOfOneNode) {
  ConfigNode root = Load();
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto depth = root.Child("model");
        if (depth.ok() && depth->GetInt("depth").value_or(0) == 50) ++good;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(good.load(), 800);
}

}  // namespace
}  // namespace reel
