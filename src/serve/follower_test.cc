// The follower against an in-memory registry: a reference that moves is loaded and swapped in;
// one that fails to load leaves the old version serving.
#include "serve/follower.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "testing/status_matchers.h"

namespace reel::serve {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

// One-class model whose logit is its version number.
class VersionModel : public Model {
 public:
  explicit VersionModel(const std::string& version) {
    info_.name = "m";
    info_.version = version;
    info_.sample_shape = {1};
    info_.class_names = {"only"};
  }
  Result<std::vector<float>> Forward(const float*, int64_t n) const override {
    return std::vector<float>(static_cast<size_t>(n), std::stof(info_.version));
  }
};

class FollowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(service_.AddModel("m", std::make_shared<VersionModel>("1"), BatcherOptions{}));
    follower_.Add({"m", "models:/m@production", Service::Role::kPrimary, BatcherOptions{}, "1"});
  }

  Result<std::unique_ptr<Model>> Load(const std::string& uri) {
    loads_.push_back(uri);
    if (uri == "models:/m/3") return FailedPreconditionError("version 3's weights do not fit");
    return std::unique_ptr<Model>(std::make_unique<VersionModel>(uri.substr(uri.rfind('/') + 1)));
  }

  Service service_;
  std::map<std::string, int64_t> aliases_ = {{"models:/m@production", 1}};
  std::vector<std::string> loads_;
  Follower follower_{&service_,
                     [this](const std::string& uri) -> Result<int64_t> {
                       const auto it = aliases_.find(uri);
                       if (it == aliases_.end()) return NotFoundError(uri + " points nowhere");
                       return it->second;
                     },
                     [this](const std::string& uri) { return Load(uri); }};
};

TEST_F(FollowerTest, AMovedAliasIsLoadedAndSwappedIn) {
  Follower::PollResult unmoved = follower_.Poll();
  EXPECT_EQ(unmoved.swapped, 0);
  EXPECT_THAT(unmoved.errors, SizeIs(0));
  EXPECT_THAT(loads_, SizeIs(0));  // nothing reloads while the alias stays

  aliases_["models:/m@production"] = 2;
  Follower::PollResult moved = follower_.Poll();
  EXPECT_EQ(moved.swapped, 1);
  EXPECT_THAT(loads_, ::testing::ElementsAre("models:/m/2"));
  EXPECT_EQ(service_.ServedVersion("m"), "2");
  EXPECT_EQ(follower_.Poll().swapped, 0);
}

TEST_F(FollowerTest, AVersionThatFailsToLoadIsSkippedUntilTheAliasMovesAgain) {
  aliases_["models:/m@production"] = 3;
  Follower::PollResult failed = follower_.Poll();
  EXPECT_EQ(failed.swapped, 0);
  ASSERT_THAT(failed.errors, SizeIs(1));
  EXPECT_THAT(failed.errors[0].message(), HasSubstr("version 1 keeps serving"));
  EXPECT_THAT(failed.errors[0].message(), HasSubstr("do not fit"));
  EXPECT_EQ(service_.ServedVersion("m"), "1");
  EXPECT_THAT(follower_.Poll().errors, SizeIs(0));  // not retried: no error every poll
  EXPECT_THAT(loads_, SizeIs(1));

  aliases_["models:/m@production"] = 4;
  EXPECT_EQ(follower_.Poll().swapped, 1);
  EXPECT_EQ(service_.ServedVersion("m"), "4");
}

TEST_F(FollowerTest, AnUnresolvableReferenceIsReportedAndChangesNothing) {
  aliases_.clear();
  Follower::PollResult result = follower_.Poll();
  ASSERT_THAT(result.errors, SizeIs(1));
  EXPECT_STATUS(result.errors[0], StatusCode::kNotFound);
  EXPECT_EQ(service_.ServedVersion("m"), "1");
}

TEST_F(FollowerTest, StopEndsTheThreadWithoutWaitingForTheInterval) {
  follower_.Start(std::chrono::hours(1));
  follower_.Stop();  // returns at once; a second Stop (the destructor's) is harmless
  EXPECT_EQ(service_.ServedVersion("m"), "1");
}

TEST(MovingReference, OnlyAliasesAndBranchesMove) {
  EXPECT_TRUE(IsMovingReference("models:/m@production"));
  EXPECT_TRUE(IsMovingReference("models:/m/branch/main"));
  EXPECT_TRUE(IsMovingReference("models:/m"));
  EXPECT_FALSE(IsMovingReference("models:/m/4"));
  EXPECT_FALSE(IsMovingReference("runs/m/checkpoints"));
}

}  // namespace
}  // namespace reel::serve
