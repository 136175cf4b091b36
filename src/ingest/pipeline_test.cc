// The ingest pipeline end to end on real H.264 videos that datagen makes, in memory stores.
#include "ingest/pipeline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "datagen/datagen.h"
#include "dataset/frames_codec.h"
#include "dataset/manifest.h"
#include "dataset/shard_reader.h"
#include "media/input.h"
#include "media/probe.h"
#include "storage/memory_store.h"
#include "storage/open.h"
#include "testing/status_matchers.h"

namespace reel::ingest {
namespace {

// Makes a small synthetic UCF101-style source once per process, at mem://ingest-src.
const std::string& SourceUri() {
  static const std::string uri = [] {
    auto store = storage::OpenStore("mem://ingest-src");
    EXPECT_OK(store);
    datagen::DatagenOptions o;
    o.videos_per_class = 4;  // 3 train, 1 test per class
    o.width = 64;
    o.height = 48;
    o.min_frames = 18;
    o.max_frames = 26;
    o.show_progress = false;
    auto report = datagen::GenerateDataset(**store, "ucf", o, 2);
    EXPECT_OK(report);
    return std::string("mem://ingest-src/ucf");
  }();
  return uri;
}

IngestOptions Options(storage::ObjectStore* out) {
  IngestOptions o;
  o.source = SourceUri();
  o.output_store = out;
  o.name = "synthetic";
  o.clip.clip_frames = 8;
  o.clip.short_side = 32;
  o.workers = 2;
  o.progress = false;
  o.shard_bytes = 1 << 20;
  return o;
}

// Every record of every shard of a split, by key.
std::map<std::string, dataset::Record> ReadSplit(storage::ObjectStore& store,
                                                 const std::string& split) {
  std::map<std::string, dataset::Record> records;
  auto numbers = dataset::ListShards(store, "", split);
  EXPECT_OK(numbers);
  for (uint32_t n : *numbers) {
    auto reader = dataset::ShardReader::Open(store, "", split, n);
    EXPECT_OK(reader);
    for (size_t i = 0; i < (*reader)->num_records(); ++i) {
      auto record = (*reader)->ReadRecord(i);
      EXPECT_OK(record);
      EXPECT_TRUE(records.emplace(record->key, *record).second) << "duplicate key " << record->key;
    }
  }
  return records;
}

TEST(IngestPipelineTest, VideoModeMakesH264ClipsWithAKeyframeAtTheirStart) {
  storage::MemoryStore out("video-out");
  auto report = RunIngest(Options(&out));
  ASSERT_OK(report);
  EXPECT_EQ(report->videos_listed, 32);
  EXPECT_EQ(report->videos_ingested, 32);
  EXPECT_TRUE(report->failed.empty());

  auto manifest = dataset::Manifest::Read(out, "");
  ASSERT_OK(manifest);
  EXPECT_EQ(manifest->name, "synthetic");
  EXPECT_EQ(manifest->classes.size(), 8u);
  EXPECT_EQ(manifest->classes[0], "MoveLeft");
  ASSERT_TRUE(manifest->splits.count("train") && manifest->splits.count("test"));
  // 18..26 frames per video at 8 frames per clip: 2 or 3 clips each.
  uint64_t total = manifest->splits["train"].records + manifest->splits["test"].records;
  EXPECT_GE(total, 64u);
  EXPECT_LE(total, 96u);
  EXPECT_EQ(report->clips["train"] + report->clips["test"], static_cast<int64_t>(total));

  auto train = ReadSplit(out, "train");
  ASSERT_EQ(train.size(), manifest->splits["train"].records);
  const dataset::Record& first = train.begin()->second;
  EXPECT_EQ(first.payload_ext, "mp4");
  auto info = media::Probe(media::Input::View(first.payload, first.key));
  ASSERT_OK(info);
  EXPECT_EQ(info->codec, "h264");
  EXPECT_EQ(info->frame_count, 8);
  EXPECT_EQ(info->keyframes, (std::vector<int64_t>{0}));
  EXPECT_EQ(std::min(info->width, info->height), 32);
  EXPECT_EQ(first.metadata["frames"], 8);
  EXPECT_EQ(first.metadata["split"], "train");
  EXPECT_EQ(first.label_name, manifest->classes[static_cast<size_t>(first.label)]);
  // Finished: no checkpoint left, the report beside the manifest.
  EXPECT_STATUS(out.Head("_ingest/state.json"), StatusCode::kNotFound);
  EXPECT_OK(out.Head("ingest_report.json"));
  // Every stage took time, and no more than the workers had between them.
  const StageTimes& t = report->stages;
  for (double stage : {t.open_s, t.decode_s, t.convert_s, t.encode_s, report->write_s}) {
    EXPECT_GT(stage, 0);
  }
  const double workers = Options(&out).workers;
  EXPECT_LE(t.open_s + t.decode_s + t.convert_s + t.encode_s, workers * report->seconds);
  auto written = nlohmann::json::parse(out.Get("ingest_report.json").value());
  EXPECT_DOUBLE_EQ(written["stages_s"]["encode"].get<double>(), t.encode_s);
}

TEST(IngestPipelineTest, FramesModeStoresDecodableUint8Frames) {
  storage::MemoryStore out("frames-out");
  IngestOptions o = Options(&out);
  o.encode.mode = dataset::DatasetMode::kFrames;
  o.clip.fps = 12.5;  // resampled from 25 fps: every other frame
  auto report = RunIngest(o);
  ASSERT_OK(report);
  auto test = ReadSplit(out, "test");
  ASSERT_FALSE(test.empty());
  const dataset::Record& record = test.begin()->second;
  EXPECT_EQ(record.payload_ext, "frames.zst");
  auto frames = dataset::DecodeFrames(record.payload);
  ASSERT_OK(frames);
  EXPECT_EQ(frames->header.frames, 8u);
  EXPECT_EQ(std::min(frames->header.height, frames->header.width), 32u);
  EXPECT_EQ(frames->header.channels, 3u);
  EXPECT_EQ(record.metadata["end_frame"].get<int>() - record.metadata["start_frame"].get<int>(),
            15);
}

// Records are appended in listing order and each video's clips are made by one worker, so the
// shards are byte-identical whatever the worker count, in both modes.
TEST(IngestPipelineTest, TheDatasetDoesNotDependOnTheWorkerCount) {
  for (auto mode : {dataset::DatasetMode::kFrames, dataset::DatasetMode::kVideo}) {
    storage::MemoryStore one("w1"), three("w3");
    IngestOptions o = Options(&one);
    o.encode.mode = mode;
    o.workers = 1;
    ASSERT_OK(RunIngest(o));
    o.output_store = &three;
    o.workers = 3;
    ASSERT_OK(RunIngest(o));
    auto a = storage::ListAll(one, "train/");
    auto b = storage::ListAll(three, "train/");
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].key, (*b)[i].key);
      EXPECT_TRUE(one.Get((*a)[i].key).value() == three.Get((*b)[i].key).value())
          << dataset::DatasetModeName(mode) << " " << (*a)[i].key;
    }
  }
}

// The labels of a split's records in shard and record order.
std::vector<int> LabelsInOrder(storage::ObjectStore& store, const std::string& split) {
  std::vector<int> labels;
  auto numbers = dataset::ListShards(store, "", split);
  EXPECT_OK(numbers);
  for (uint32_t n : *numbers) {
    auto reader = dataset::ShardReader::Open(store, "", split, n);
    EXPECT_OK(reader);
    for (const auto& record : (*reader)->index().records) labels.push_back(record.label);
  }
  return labels;
}

TEST(IngestPipelineTest, VideosAreWrittenInASeededShuffledOrder) {
  storage::MemoryStore listed("listed"), shuffled("shuffled"), again("again"), other("other");
  IngestOptions o = Options(&listed);
  o.shuffle = false;
  ASSERT_OK(RunIngest(o));
  // How often the label changes along the stream: classes - 1 when they come class by class.
  auto changes = [](const std::vector<int>& labels) {
    size_t n = 0;
    for (size_t i = 1; i < labels.size(); ++i) n += labels[i] != labels[i - 1];
    return n;
  };
  std::vector<int> in_listing_order = LabelsInOrder(listed, "train");
  EXPECT_EQ(changes(in_listing_order), 7u);

  o.shuffle = true;
  o.output_store = &shuffled;
  ASSERT_OK(RunIngest(o));
  std::vector<int> mixed = LabelsInOrder(shuffled, "train");
  EXPECT_GT(changes(mixed), 12u);
  // The first half of the stream (a rank's share with 2 ranks) holds most classes.
  std::set<int> first_half(mixed.begin(), mixed.begin() + mixed.size() / 2);
  EXPECT_GE(first_half.size(), 6u);
  EXPECT_EQ(ReadSplit(shuffled, "train").size(),
            ReadSplit(listed, "train").size());  // the same clips

  o.output_store = &again;
  ASSERT_OK(RunIngest(o));
  EXPECT_EQ(LabelsInOrder(again, "train"), mixed);  // deterministic
  o.output_store = &other;
  o.shuffle_seed = 1;
  ASSERT_OK(RunIngest(o));
  EXPECT_NE(LabelsInOrder(other, "train"), mixed);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(IngestPipelineTest, BadFilesAreReportedAndSkippedNeverFatal) {
  auto src = storage::OpenStore("mem://ingest-bad");
  ASSERT_OK(src);
  auto good = storage::OpenStore("mem://ingest-src");
  std::string video = (*good)->Get("ucf/MoveLeft/MoveLeft_00000.mp4").value();
  ASSERT_OK((*src)->Put("bad/A/good.mp4", video));
  ASSERT_OK((*src)->Put("bad/A/truncated.mp4", video.substr(0, video.size() / 3)));
  ASSERT_OK((*src)->Put("bad/A/empty.mp4", ""));
  ASSERT_OK((*src)->Put("bad/B/text.avi", "this is not a video at all\n"));
  // An audio-only file made by the ffmpeg command line.
  std::string audio_path = "/tmp/reel-ingest-audio-" + std::to_string(::getpid()) + ".m4a";
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i sine=frequency=440:duration=1 " +
                         audio_path)
                            .c_str()),
            0);
  ASSERT_OK((*src)->Put("bad/B/audio.mp4", ReadFile(audio_path)));
  std::remove(audio_path.c_str());

  storage::MemoryStore out("bad-out");
  IngestOptions o = Options(&out);
  o.source = "mem://ingest-bad/bad";
  auto report = RunIngest(o);
  ASSERT_OK(report);
  EXPECT_EQ(report->videos_listed, 5);
  ASSERT_EQ(report->failed.size(), 4u);
  std::set<std::string> failed;
  for (const auto& f : report->failed) {
    failed.insert(f.key.substr(f.key.rfind('/') + 1));
    EXPECT_FALSE(f.reason.empty());
  }
  EXPECT_EQ(failed, (std::set<std::string>{"truncated.mp4", "empty.mp4", "text.avi", "audio.mp4"}));
  EXPECT_GT(report->clips["train"], 0);
  auto saved = out.Get("ingest_report.json");
  ASSERT_OK(saved);
  EXPECT_NE(saved->find("truncated.mp4"), std::string::npos);
}

// Fails the commit of one shard, once: the run stops as a crash would, after checkpointing.
class FailOnceStore : public storage::MemoryStore {
 public:
  FailOnceStore(std::string name, std::string fail_key)
      : MemoryStore(std::move(name)), fail_key_(std::move(fail_key)) {}
  Result<std::unique_ptr<storage::ObjectWriter>> OpenWriter(std::string_view key) override {
    if (key == fail_key_ && !failed_) {
      failed_ = true;
      return UnavailableError("injected failure writing " + std::string(key));
    }
    return MemoryStore::OpenWriter(key);
  }

 private:
  std::string fail_key_;
  bool failed_ = false;
};

TEST(IngestPipelineTest, AnInterruptedRunResumesWithoutRedoingOrDuplicatingClips) {
  storage::MemoryStore clean("clean");
  IngestOptions o = Options(&clean);
  o.shard_bytes = 256 << 10;
  o.encode.mode = dataset::DatasetMode::kFrames;  // big records: several shards per split
  o.encode.zstd_level = 1;
  ASSERT_OK(RunIngest(o));
  auto expected = ReadSplit(clean, "train");
  auto shards = dataset::ListShards(clean, "", "train");
  ASSERT_OK(shards);
  ASSERT_GE(shards->size(), 3u) << "the test needs several shards";

  FailOnceStore flaky("flaky", "train/shard-000002.tar");
  o.output_store = &flaky;
  auto failed = RunIngest(o);
  ASSERT_STATUS(failed, StatusCode::kUnavailable) << failed.status().ToString();
  ASSERT_OK(flaky.Head("_ingest/state.json")) << "no checkpoint after two shards";
  std::string shard0_etag = flaky.Head("train/shard-000000.tar").value().etag;
  EXPECT_STATUS(flaky.Head("manifest.json"), StatusCode::kNotFound);

  auto resumed = RunIngest(o);
  ASSERT_OK(resumed);
  EXPECT_GT(resumed->videos_resumed, 0);
  EXPECT_LT(resumed->videos_ingested, 32);
  EXPECT_EQ(flaky.Head("train/shard-000000.tar").value().etag, shard0_etag)
      << "a finished shard was rewritten";
  auto got = ReadSplit(flaky, "train");  // ReadSplit fails the test on a duplicate key
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [key, record] : expected) {
    ASSERT_TRUE(got.count(key)) << key;
    EXPECT_TRUE(got[key].payload == record.payload) << key;
  }
  auto manifest = dataset::Manifest::Read(flaky, "");
  ASSERT_OK(manifest);
  EXPECT_EQ(manifest->splits["train"].records, expected.size());
}

TEST(IngestPipelineTest, RerunsAreNoOpsAndOtherSettingsNeedOverwrite) {
  storage::MemoryStore out("rerun");
  IngestOptions o = Options(&out);
  ASSERT_OK(RunIngest(o));
  auto again = RunIngest(o);
  ASSERT_OK(again);
  EXPECT_TRUE(again->already_complete);
  o.clip.clip_frames = 4;
  auto other = RunIngest(o);
  EXPECT_STATUS(other, StatusCode::kAlreadyExists) << other.status().ToString();
  o.overwrite = true;
  auto replaced = RunIngest(o);
  ASSERT_OK(replaced);
  EXPECT_EQ(dataset::Manifest::Read(out, "").value().clip_settings["clip"]["clip_frames"], 4);
}

TEST(IngestPipelineTest, OptionsAreValidated) {
  storage::MemoryStore out("invalid");
  IngestOptions o = Options(&out);
  o.clip.clip_frames = 0;
  EXPECT_STATUS(RunIngest(o), StatusCode::kInvalidArgument);
  o = Options(&out);
  o.source = "mem://nothing-here/x";
  EXPECT_STATUS(RunIngest(o), StatusCode::kNotFound);
}

}  // namespace
}  // namespace reel::ingest
