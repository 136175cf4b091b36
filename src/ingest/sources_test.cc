#include "ingest/sources.h"

#include <gtest/gtest.h>

#include "storage/memory_store.h"
#include "testing/status_matchers.h"

namespace reel::ingest {
namespace {

using storage::MemoryStore;

class SourcesTest : public ::testing::Test {
 protected:
  void Put(const std::string& key, const std::string& data = "video-bytes") {
    ASSERT_OK(store_.Put(key, data));
  }
  MemoryStore store_;
};

TEST_F(SourcesTest, Ucf101FoldersWithoutListsAreAllTrainWithSortedClasses) {
  Put("ucf/Walk/v_Walk_g01_c01.avi");
  Put("ucf/Walk/v_Walk_g01_c02.avi");
  Put("ucf/Archery/v_Archery_g01_c01.avi");
  Put("ucf/Archery/notes.txt");  // not a video
  auto listing = ListUcf101(store_, "ucf");
  ASSERT_OK(listing);
  EXPECT_EQ(listing->format, "ucf101");
  EXPECT_EQ(listing->class_names, (std::vector<std::string>{"Archery", "Walk"}));
  ASSERT_EQ(listing->videos.size(), 3u);
  EXPECT_EQ(listing->videos[0].key, "ucf/Archery/v_Archery_g01_c01.avi");
  EXPECT_EQ(listing->videos[0].label, 0);
  EXPECT_EQ(listing->videos[2].label, 1);
  for (const auto& v : listing->videos) EXPECT_EQ(v.split, "train");
  EXPECT_EQ(listing->videos[0].size, 11u);
  EXPECT_FALSE(listing->hash.empty());
}

TEST_F(SourcesTest, Ucf101ClassIndAndSplitListsDecideOrderAndSplits) {
  Put("d/Zoom/v_Zoom_g01_c01.avi");
  Put("d/Zoom/v_Zoom_g02_c01.avi");
  Put("d/HandstandPushups/v_HandStandPushups_g01_c01.avi");
  Put("d/Extra/v_Extra_g01_c01.avi");
  Put("d/ucfTrainTestlist/classInd.txt", "1 Zoom\n2 HandstandPushups\n3 Extra\n");
  // Real UCF101 lists spell some classes with different case than the folders.
  Put("d/ucfTrainTestlist/trainlist01.txt",
      "Zoom/v_Zoom_g01_c01.avi 1\nHandStandPushups/v_HandStandPushups_g01_c01.avi 2\n");
  Put("d/ucfTrainTestlist/testlist01.txt", "Zoom/v_Zoom_g02_c01.avi\nZoom/v_Zoom_g09_c09.avi\n");
  auto listing = ListUcf101(store_, "d");
  ASSERT_OK(listing);
  EXPECT_EQ(listing->class_names, (std::vector<std::string>{"Zoom", "HandstandPushups", "Extra"}));
  ASSERT_EQ(listing->videos.size(), 3u);
  EXPECT_EQ(listing->videos[0].key, "d/HandstandPushups/v_HandStandPushups_g01_c01.avi");
  EXPECT_EQ(listing->videos[0].label, 1);
  EXPECT_EQ(listing->videos[0].split, "train");
  EXPECT_EQ(listing->videos[1].key, "d/Zoom/v_Zoom_g01_c01.avi");
  EXPECT_EQ(listing->videos[1].label, 0);
  EXPECT_EQ(listing->videos[2].split, "test");
  // A listed file that does not exist, and a video in no list, are reported, not fatal.
  ASSERT_EQ(listing->missing.size(), 2u);
  std::string reasons = listing->missing[0].reason + "|" + listing->missing[1].reason;
  EXPECT_NE(reasons.find("listed in testlist01.txt but not found"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("not in trainlist01.txt or testlist01.txt"), std::string::npos) << reasons;
}

TEST_F(SourcesTest, Ucf101Errors) {
  EXPECT_STATUS(ListUcf101(store_, "nothing"), StatusCode::kNotFound);
  Put("e/A/a.mp4");
  Put("e/B/b.mp4");
  Put("e/classInd.txt", "1 A\n");
  auto unknown = ListUcf101(store_, "e");
  EXPECT_STATUS(unknown, StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("class folder 'B'"), std::string::npos);
  Put("e/classInd.txt", "1 A\nx B\n");
  auto malformed = ListUcf101(store_, "e");
  EXPECT_NE(malformed.status().message().find("e/classInd.txt:2:"), std::string::npos)
      << malformed.status().ToString();
  Put("e/classInd.txt", "1 A\n3 B\n");
  EXPECT_NE(ListUcf101(store_, "e").status().message().find("without gaps"), std::string::npos);
}

TEST_F(SourcesTest, KineticsCsvFindsTrimmedFilesAnywhereAndReportsMissingOnes) {
  Put("k/train/abseiling/abc_000010_000020.mp4");
  Put("k/val/zumba/xyz_000000_000010.mkv");
  Put("k/kinetics.csv",
      "label,youtube_id,time_start,time_end,split\n"
      "abseiling,abc,10,20,train\n"
      "\"air drumming\",gone,5,15,train\n"
      "zumba,xyz,0,10,validate\n");
  auto listing = ListSources(store_, "k/kinetics.csv");
  ASSERT_OK(listing);
  EXPECT_EQ(listing->format, "kinetics");
  // The missing video's label still defines a class, so indices do not depend on downloads.
  EXPECT_EQ(listing->class_names, (std::vector<std::string>{"abseiling", "air drumming", "zumba"}));
  ASSERT_EQ(listing->videos.size(), 2u);
  EXPECT_EQ(listing->videos[0].key, "k/train/abseiling/abc_000010_000020.mp4");
  EXPECT_EQ(listing->videos[1].label, 2);
  EXPECT_EQ(listing->videos[1].split, "val");
  ASSERT_EQ(listing->missing.size(), 1u);
  EXPECT_EQ(listing->missing[0].reference, "gone_000005_000015");
  EXPECT_NE(listing->missing[0].reason.find("k/kinetics.csv:3"), std::string::npos);
}

TEST_F(SourcesTest, KineticsErrorsNameFileAndLine) {
  Put("k/bad.csv", "label,youtube_id,time_start,time_end\nx,y,20,10\n");
  auto reversed = ListKinetics(store_, "k/bad.csv", "k");
  EXPECT_STATUS(reversed, StatusCode::kInvalidArgument);
  EXPECT_NE(reversed.status().message().find("k/bad.csv:2:"), std::string::npos);
  Put("k/short.csv", "label,youtube_id,time_start,time_end\nx,y,1\n");
  EXPECT_NE(ListKinetics(store_, "k/short.csv", "k").status().message().find("expected 4 columns"),
            std::string::npos);
  Put("k/header.csv", "label,id\n");
  EXPECT_NE(ListKinetics(store_, "k/header.csv", "k").status().message().find("'youtube_id'"),
            std::string::npos);
  EXPECT_STATUS(ListKinetics(store_, "k/none.csv", "k"), StatusCode::kNotFound);
}

TEST_F(SourcesTest, CsvManifestWithSegmentsAndNumericLabels) {
  Put("m/videos/a.mp4");
  Put("m/videos/b.webm");
  Put("m/list.csv",
      "path,label,start,end,split\n"
      "videos/a.mp4,10,0.5,2.5,train\n"
      "videos/b.webm,2,,,test\n"
      "videos/a.mp4,2,3,4,val\n"
      "videos/missing.mp4,10,,,train\n");
  auto listing = ListSources(store_, "m/list.csv");
  ASSERT_OK(listing);
  EXPECT_EQ(listing->format, "manifest");
  EXPECT_EQ(listing->class_names, (std::vector<std::string>{"2", "10"}));  // numeric order
  ASSERT_EQ(listing->videos.size(), 3u);
  EXPECT_EQ(listing->videos[0].key, "m/videos/a.mp4");
  EXPECT_DOUBLE_EQ(listing->videos[0].start_s, 0.5);
  EXPECT_DOUBLE_EQ(listing->videos[0].end_s, 2.5);
  EXPECT_EQ(listing->videos[0].label, 1);
  EXPECT_EQ(listing->videos[1].split, "val");
  EXPECT_EQ(listing->videos[2].start_s, -1);
  ASSERT_EQ(listing->missing.size(), 1u);
  EXPECT_EQ(listing->missing[0].reference, "m/videos/missing.mp4");
}

TEST_F(SourcesTest, JsonlManifestAndItsErrors) {
  Put("j/v/a.mp4");
  Put("j/list.jsonl",
      "{\"path\": \"v/a.mp4\", \"label\": \"cat\"}\n\n"
      "{\"path\": \"v/a.mp4\", \"label\": \"dog\", \"start\": 1, \"end\": 2, \"split\": "
      "\"test\"}\n");
  auto listing = ListSources(store_, "j/list.jsonl");
  ASSERT_OK(listing);
  EXPECT_EQ(listing->class_names, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(listing->videos.size(), 2u);
  EXPECT_EQ(listing->videos[1].split, "test");
  EXPECT_DOUBLE_EQ(listing->videos[1].start_s, 1);

  Put("j/bad.jsonl", "{\"path\": \"v/a.mp4\"}\n");
  EXPECT_NE(ListManifest(store_, "j/bad.jsonl")
                .status()
                .message()
                .find("j/bad.jsonl:1: needs a \"label\""),
            std::string::npos);
  Put("j/bad2.jsonl", "{\"path\": \"v/a.mp4\", \"label\": 1, \"split\": \"holdout\"}\n");
  EXPECT_NE(ListManifest(store_, "j/bad2.jsonl").status().message().find("unknown split 'holdout'"),
            std::string::npos);
  Put("j/bad3.jsonl", "not json\n");
  EXPECT_STATUS(ListManifest(store_, "j/bad3.jsonl"), StatusCode::kInvalidArgument);
}

TEST_F(SourcesTest, ListingHashChangesWhenASourceVideoChanges) {
  Put("h/A/a.mp4", "one");
  Put("h/B/b.mp4", "two");
  auto first = ListUcf101(store_, "h");
  auto same = ListUcf101(store_, "h");
  ASSERT_TRUE(first.ok() && same.ok());
  EXPECT_EQ(first->hash, same->hash);
  Put("h/A/a.mp4", "changed");
  auto changed = ListUcf101(store_, "h");
  ASSERT_OK(changed);
  EXPECT_NE(first->hash, changed->hash);
}

TEST(IsVideoKeyTest, KnownExtensionsAnyCase) {
  EXPECT_TRUE(IsVideoKey("a/b.MP4"));
  EXPECT_TRUE(IsVideoKey("x.webm"));
  EXPECT_FALSE(IsVideoKey("a.mp4/readme"));
  EXPECT_FALSE(IsVideoKey("notes.txt"));
  EXPECT_FALSE(IsVideoKey("noext"));
}

}  // namespace
}  // namespace reel::ingest
