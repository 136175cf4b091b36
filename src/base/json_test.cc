#include "base/json.h"

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace reel {
namespace {

TEST(JsonTest, ParseReturnsErrorsAsValues) {
  ASSERT_OK_AND_ASSIGN(nlohmann::json doc, ParseJson(R"({"a": 1})", "x.json"));
  EXPECT_EQ(doc["a"], 1);
  auto bad = ParseJson(R"({"a": )", "state.json");
  EXPECT_STATUS(bad, StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("state.json: not valid JSON"), std::string::npos)
      << bad.status().message();
  EXPECT_STATUS(ParseJson("", "empty.json"), StatusCode::kDataLoss);
}

TEST(JsonTest, FieldsNameTheKeyThatIsMissingOrMistyped) {
  ASSERT_OK_AND_ASSIGN(nlohmann::json doc,
                       ParseJson(R"({"step": 5, "lr": 0.1, "on": true, "name": "x", "n": -2,
                                    "loader": {"epoch": "one"}})",
                                 "t"));
  JsonFields f(doc, "");
  EXPECT_EQ(f.Uint("step"), 5u);
  EXPECT_DOUBLE_EQ(f.Double("lr"), 0.1);
  EXPECT_TRUE(f.Bool("on"));
  EXPECT_EQ(f.String("name"), "x");
  EXPECT_EQ(f.Int("n"), -2);
  EXPECT_TRUE(f.ok()) << f.error();

  JsonFields loader(f.Object("loader"), f.Path("loader"));
  EXPECT_EQ(loader.Int("epoch"), 0);
  EXPECT_EQ(loader.error(), "loader.epoch: expected an integer, got string");

  JsonFields missing(doc, "");
  missing.Uint("steps");
  EXPECT_EQ(missing.error(), "steps: missing");
  JsonFields negative(doc, "");
  negative.Uint("n");
  EXPECT_EQ(negative.error(), "n: expected an unsigned integer, got -2");
  JsonFields not_object(doc["step"], "step");
  EXPECT_EQ(not_object.error(), "step: expected an object");
}

}  // namespace
}  // namespace reel
