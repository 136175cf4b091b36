// `reel predict`'s driver (predict.h) with a small in-memory model over real test videos in
// memory stores: every input once and in order, a crash at every write of a run and a rerun that
// loses and repeats nothing, bad videos as error lines, the listings.
#include "serve/predict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "dataset/manifest.h"
#include "dataset/shard_writer.h"
#include "serve/sum_model_testing.h"
#include "storage/memory_store.h"
#include "storage/open.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace reel::serve {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The sum model, or an error when broken.
class TallyModel : public SumModel {
 public:
  explicit TallyModel(std::string version = "1") : SumModel("tally", std::move(version)) {}
  Result<std::vector<float>> Forward(const float* input, int64_t n) const override {
    if (broken) return InternalError("the model fell over");
    return SumModel::Forward(input, n);
  }
  std::atomic<bool> broken{false};
};

// A store whose writes fail once `puts` Puts have succeeded, as if the process died there.
class DyingStore : public storage::ObjectStore {
 public:
  DyingStore(storage::ObjectStore& base, int puts) : base_(base), left_(puts) {}
  std::string uri() const override { return base_.uri(); }
  Status Put(std::string_view k, std::string_view d) override {
    if (left_-- <= 0) return UnavailableError("the process died before putting " + std::string(k));
    ++puts_;
    return base_.Put(k, d);
  }
  Status PutIfAbsent(std::string_view, std::string_view) override {
    return UnimplementedError("predict never needs PutIfAbsent");
  }
  Result<std::string> Get(std::string_view k, storage::ObjectInfo* i) override {
    return base_.Get(k, i);
  }
  Result<std::string> GetRange(std::string_view k, uint64_t o, uint64_t n) override {
    return base_.GetRange(k, o, n);
  }
  Result<storage::ObjectInfo> Head(std::string_view k) override { return base_.Head(k); }
  Result<storage::ListPage> List(const storage::ListOptions& o) override { return base_.List(o); }
  Status Delete(std::string_view k) override {
    return left_ <= 0 ? UnavailableError("the process died") : base_.Delete(k);
  }
  Result<std::unique_ptr<storage::ObjectReader>> OpenReader(std::string_view k) override {
    return base_.OpenReader(k);
  }
  Result<std::unique_ptr<storage::ObjectWriter>> OpenWriter(std::string_view) override {
    return UnimplementedError("predict never streams");
  }
  int puts() const { return puts_; }

 private:
  storage::ObjectStore& base_;
  int left_;
  int puts_ = 0;
};

std::string TestdataVideo(const std::string& name) {
  std::ifstream in(reel::testing::SourcePath("testdata/videos/" + name), std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A fresh memory store (stores are shared by name in a process; tests may repeat) with, under
// videos/, four small real videos (one in a subfolder), one that is not a video, and a file that
// is no video by its name. Returns its URI.
std::string PutVideos(const std::string& name) {
  static std::atomic<int> runs{0};
  std::string root = "mem://" + name + "-" + std::to_string(runs++);
  Result<std::unique_ptr<storage::ObjectStore>> store = storage::OpenStore(root);
  EXPECT_OK(store);
  const std::pair<const char*, std::string> objects[] = {
      {"videos/a.mov", TestdataVideo("decord_video_0.mov")},
      {"videos/b.mp4", TestdataVideo("torchcodec_h265_video.mp4")},
      {"videos/bad.mp4", "this is not a video"},
      {"videos/c/d.mp4", TestdataVideo("torchcodec_test_non_zero_start.mp4")},
      {"videos/e.mp4", TestdataVideo("decord_video_0.mov")},
      {"videos/notes.txt", "not listed"}};
  for (const auto& [key, bytes] : objects) EXPECT_OK((*store)->Put(key, bytes));
  return root;
}

// Every line of the finished parts in order; checks that no other part is there.
std::vector<json> OutputLines(storage::ObjectStore& out) {
  std::vector<json> lines;
  Result<std::string> progress = out.Get("progress.json");
  EXPECT_OK(progress);
  if (!progress.ok()) return lines;
  std::set<std::string> listed;
  const json doc = json::parse(*progress);
  for (const json& part : doc["parts"]) {
    listed.insert(part["name"].get<std::string>());
    Result<std::string> text = out.Get(part["name"].get<std::string>());
    EXPECT_OK(text);
    std::istringstream in(text.ok() ? *text : "");
    size_t count = 0;
    for (std::string line; std::getline(in, line); ++count) lines.push_back(json::parse(line));
    EXPECT_EQ(count, part["lines"].get<size_t>()) << part.dump();
  }
  const std::vector<storage::ObjectInfo> parts = storage::ListAll(out, "part-").value_or({});
  for (const storage::ObjectInfo& o : parts) {
    EXPECT_TRUE(listed.count(o.key)) << o.key << " is not listed in progress.json";
  }
  return lines;
}

std::vector<std::string> KeysOf(const std::vector<json>& lines) {
  std::vector<std::string> keys;
  keys.reserve(lines.size());
  for (const json& line : lines) keys.push_back(line["key"].get<std::string>());
  return keys;
}

class PredictTest : public ::testing::Test {
 protected:
  static PredictOptions Options(const std::string& input) {
    PredictOptions o;
    o.input = input;
    o.output = "unused";
    o.top_k = 2;
    o.workers = 3;
    o.instances = 2;
    o.max_batch = 3;
    o.part_size = 2;
    return o;
  }
  PredictOptions OptionsInto(const std::string& input, storage::ObjectStore* out) {
    PredictOptions o = Options(input);
    o.output_store = out;
    return o;
  }

  storage::MemoryStore out_{"predict-out"};
  TallyModel model_;
};

TEST_F(PredictTest, PredictsEveryVideoOnceInListingOrder) {
  const std::string root = PutVideos("predict-every");
  const PredictOptions o = OptionsInto(root + "/videos", &out_);
  ASSERT_OK_AND_ASSIGN(PredictSummary summary, Predict(o, model_));
  EXPECT_EQ(summary.listed, 5);
  EXPECT_EQ(summary.predicted, 5);
  EXPECT_EQ(summary.failed, 1);
  EXPECT_EQ(summary.earlier, 0);
  EXPECT_EQ(summary.parts, 3);
  const std::vector<json> lines = OutputLines(out_);
  EXPECT_THAT(KeysOf(lines), ElementsAre("a.mov", "b.mp4", "bad.mp4", "c/d.mp4", "e.mp4"));
  for (const json& line : lines) {
    SCOPED_TRACE(line.dump());
    EXPECT_EQ(line["source"], root + "/videos/" + line["key"].get<std::string>());
    if (line["key"] == "bad.mp4") {
      EXPECT_THAT(line["error"].get<std::string>(), HasSubstr("bad.mp4 is not a video"));
      EXPECT_FALSE(line.contains("top"));
      continue;
    }
    ASSERT_EQ(line["top"].size(), 2u);
    EXPECT_GE(line["top"][0]["score"].get<double>(), line["top"][1]["score"].get<double>());
    EXPECT_LE(line["top"][0]["score"].get<double>() + line["top"][1]["score"].get<double>(), 1.0);
    EXPECT_FALSE(line.contains("timeline"));
  }
  EXPECT_EQ(lines[0]["top"], lines[4]["top"]);  // the same video twice
  EXPECT_TRUE(json::parse(out_.Get("progress.json").value())["complete"].get<bool>());

  // Run again: everything is there, nothing is written twice.
  ASSERT_OK_AND_ASSIGN(summary, Predict(o, model_));
  EXPECT_EQ(summary.earlier, 5);
  EXPECT_EQ(summary.predicted, 0);
  EXPECT_EQ(OutputLines(out_), lines);
}

TEST_F(PredictTest, ARunKilledAtAnyWriteResumesWithoutLossOrRepeat) {
  const std::string root = PutVideos("predict-crash");
  DyingStore counted(out_, INT_MAX);
  ASSERT_OK(Predict(OptionsInto(root + "/videos", &counted), model_).status());
  const std::vector<json> clean = OutputLines(out_);
  ASSERT_EQ(clean.size(), 5u);
  ASSERT_EQ(counted.puts(), 8);  // progress, then 3 x (part, progress), then progress again
  for (int puts = 0; puts < counted.puts(); ++puts) {
    SCOPED_TRACE("killed after " + std::to_string(puts) + " puts");
    storage::MemoryStore out("predict-crash-out");
    DyingStore dying(out, puts);
    EXPECT_STATUS(Predict(OptionsInto(root + "/videos", &dying), model_).status(),
                  StatusCode::kUnavailable);
    if (puts == 2) {  // part-00000 is there, but progress.json does not list it yet
      EXPECT_OK(out.Head("part-00000.jsonl").status());
      EXPECT_TRUE(json::parse(out.Get("progress.json").value())["parts"].empty());
    }
    ASSERT_OK_AND_ASSIGN(PredictSummary resumed,
                         Predict(OptionsInto(root + "/videos", &out), model_));
    EXPECT_EQ(resumed.earlier + resumed.predicted, 5);
    EXPECT_EQ(resumed.earlier, std::min(5, puts >= 3 ? 2 * ((puts - 1) / 2) : 0));
    EXPECT_EQ(OutputLines(out), clean);
  }
}

TEST_F(PredictTest, AModelFailureStopsTheRunAndARerunFinishesIt) {
  const std::string root = PutVideos("predict-fail");
  model_.broken = true;
  const PredictOptions o = OptionsInto(root + "/videos", &out_);
  const Result<PredictSummary> failed = Predict(o, model_);
  EXPECT_STATUS(failed.status(), StatusCode::kInternal);
  EXPECT_THAT(failed.status().message(), HasSubstr("the model fell over"));
  model_.broken = false;
  ASSERT_OK_AND_ASSIGN(PredictSummary summary, Predict(o, model_));
  EXPECT_EQ(summary.predicted, 5);
  EXPECT_EQ(OutputLines(out_).size(), 5u);
}

TEST_F(PredictTest, RefusesAnOutputOfAnotherModelOrOtherSettings) {
  const std::string root = PutVideos("predict-other");
  PredictOptions o = OptionsInto(root + "/videos", &out_);
  ASSERT_OK(Predict(o, model_).status());
  TallyModel newer("2");
  const Status refused = Predict(o, newer).status();
  EXPECT_STATUS(refused, StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("write to another output"));
  o.top_k = 3;
  EXPECT_STATUS(Predict(o, model_).status(), StatusCode::kFailedPrecondition);
  o.top_k = 2;
  o.part_size = 0;
  EXPECT_STATUS(Predict(o, model_).status(), StatusCode::kInvalidArgument);
}

TEST_F(PredictTest, ListsWithLabelsUrisMissingAndBadVideosAsErrorLines) {
  const std::string root = PutVideos("predict-list");
  ASSERT_OK_AND_ASSIGN(auto store, storage::OpenStore(root));
  ASSERT_OK(store->Put("lists/l.csv",
                       "label,path\nup,a.mov\ndown,\"c/d.mp4\"\nup,a.mov\n"
                       "flat,gone.mp4\nup," +
                           root + "/videos/bad.mp4\n"));
  ASSERT_OK(store->Put("videos/l.jsonl",
                       "{\"path\": \"b.mp4\", \"label\": 1}\n\n{\"uri\": \"e.mp4\"}\n"));
  ASSERT_OK_AND_ASSIGN(PredictListing csv, ListPredictInputs(root + "/lists/l.csv"));
  EXPECT_EQ(csv.kind, "list");
  ASSERT_EQ(csv.inputs.size(), 4u);  // a.mov once
  EXPECT_EQ(csv.inputs[0].key, "a.mov");
  EXPECT_EQ(csv.inputs[0].object, "lists/a.mov");  // below the list's folder: not there
  EXPECT_EQ(csv.inputs[1].true_label, "down");
  EXPECT_EQ(csv.inputs[3].source, root + "/videos/bad.mp4");
  EXPECT_EQ(csv.inputs[3].object, "");

  const PredictOptions o = OptionsInto(root + "/videos/l.jsonl", &out_);
  ASSERT_OK_AND_ASSIGN(PredictSummary summary, Predict(o, model_));
  EXPECT_EQ(summary.failed, 0);
  const std::vector<json> lines = OutputLines(out_);
  EXPECT_THAT(KeysOf(lines), ElementsAre("b.mp4", "e.mp4"));
  EXPECT_EQ(lines[0]["true_label"], "1");
  EXPECT_FALSE(lines[1].contains("true_label"));

  storage::MemoryStore out("predict-list-out");
  ASSERT_OK_AND_ASSIGN(summary, Predict(OptionsInto(root + "/lists/l.csv", &out), model_));
  EXPECT_EQ(summary.predicted, 4);
  EXPECT_EQ(summary.failed, 4);  // three missing, one not a video: lines, not a failed run
  for (const json& line : OutputLines(out)) EXPECT_TRUE(line.contains("error")) << line.dump();
}

TEST_F(PredictTest, ListsOneVideoAFolderAndTheSourcesOfADataset) {
  const std::string root = PutVideos("predict-kinds");
  ASSERT_OK_AND_ASSIGN(PredictListing one, ListPredictInputs(root + "/videos/c/d.mp4"));
  EXPECT_EQ(one.kind, "video");
  ASSERT_EQ(one.inputs.size(), 1u);
  EXPECT_EQ(one.inputs[0].key, "d.mp4");
  ASSERT_OK_AND_ASSIGN(PredictListing sub, ListPredictInputs(root + "/videos/c"));
  EXPECT_EQ(sub.kind, "folder");
  ASSERT_EQ(sub.inputs.size(), 1u);
  EXPECT_STATUS(ListPredictInputs(root + "/nothing").status(), StatusCode::kNotFound);

  // A dataset of three clips cut from two videos: each video once, with its class and split.
  ASSERT_OK_AND_ASSIGN(auto store, storage::OpenStore(root));
  ASSERT_OK_AND_ASSIGN(auto writer, dataset::ShardWriter::Create(*store, "ds", "val"));
  const std::string sources[] = {root + "/videos/b.mp4", root + "/videos/a.mov",
                                 root + "/videos/b.mp4"};
  for (int i = 0; i < 3; ++i) {
    dataset::Record record;
    record.key = "clip" + std::to_string(i);
    record.label = i == 1 ? 0 : 1;
    record.label_name = i == 1 ? "up" : "down";
    record.payload = "clip bytes";
    record.payload_ext = "mp4";
    record.metadata = {{"source", sources[i]}};
    ASSERT_OK(writer->AddRecord(record));
  }
  ASSERT_OK(writer->Finish());
  dataset::Manifest manifest;
  manifest.name = "ds";
  manifest.classes = {"up", "down"};
  ASSERT_OK(manifest.AddSplit("val", writer->shards()));
  ASSERT_OK(manifest.Write(*store, "ds"));
  for (const std::string& uri : {root + "/ds", root + "/ds/manifest.json"}) {
    ASSERT_OK_AND_ASSIGN(PredictListing ds, ListPredictInputs(uri));
    EXPECT_EQ(ds.kind, "dataset");
    ASSERT_EQ(ds.inputs.size(), 2u);
    EXPECT_EQ(ds.inputs[0].key, sources[1]);
    EXPECT_EQ(ds.inputs[0].true_label, "up");
    EXPECT_EQ(ds.inputs[1].key, sources[0]);
    EXPECT_EQ(ds.inputs[1].true_label, "down");
    EXPECT_EQ(ds.inputs[1].split, "val");
  }
  const PredictOptions o = OptionsInto(root + "/ds", &out_);
  ASSERT_OK_AND_ASSIGN(PredictSummary summary, Predict(o, model_));
  EXPECT_EQ(summary.predicted, 2);
  EXPECT_EQ(summary.failed, 0);
}

TEST_F(PredictTest, TimelineAndMalformedLists) {
  const std::string root = PutVideos("predict-misc");
  PredictOptions o = OptionsInto(root + "/videos/c/d.mp4", &out_);
  o.timeline = true;
  o.clips = 3;
  ASSERT_OK(Predict(o, model_).status());
  const std::vector<json> lines = OutputLines(out_);
  ASSERT_EQ(lines.size(), 1u);
  ASSERT_EQ(lines[0]["timeline"].size(), 3u);
  EXPECT_TRUE(lines[0]["timeline"][0].contains("start_s"));

  ASSERT_OK_AND_ASSIGN(auto store, storage::OpenStore(root));
  ASSERT_OK(store->Put("no-path.csv", "file,label\na.mov,up\n"));
  ASSERT_OK(store->Put("bad.jsonl", "{\"path\": \"a.mov\"}\n[1, 2]\n"));
  const Status csv = ListPredictInputs(root + "/no-path.csv").status();
  EXPECT_STATUS(csv, StatusCode::kInvalidArgument);
  EXPECT_THAT(csv.message(), HasSubstr("no-path.csv:1:"));
  const Status jsonl = ListPredictInputs(root + "/bad.jsonl").status();
  EXPECT_STATUS(jsonl, StatusCode::kInvalidArgument);
  EXPECT_THAT(jsonl.message(), HasSubstr("bad.jsonl:2:"));
}

}  // namespace
}  // namespace reel::serve
