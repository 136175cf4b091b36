// Tests of GenerateDataset: the UCF101 layout, byte-identical output whatever the thread count,
// real H.264 MP4 files with the expected frames, and errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>

#include "datagen/datagen.h"
#include "media/input.h"
#include "media/probe.h"
#include "storage/local_store.h"
#include "storage/memory_store.h"
#include "storage/testing/temp_dir.h"
#include "testing/status_matchers.h"

namespace reel::datagen {
namespace {

using storage::MemoryStore;

DatagenOptions Tiny() {
  DatagenOptions o;
  o.width = 48;
  o.height = 40;
  o.min_frames = 4;
  o.max_frames = 7;
  o.videos_per_class = 2;
  o.show_progress = false;
  return o;
}

std::map<std::string, std::string> Contents(storage::ObjectStore& store) {
  std::map<std::string, std::string> out;
  auto all = storage::ListAll(store, "");
  EXPECT_OK(all);
  for (const auto& info : all.value_or({})) out[info.key] = *store.Get(info.key);
  return out;
}

TEST(GenerateTest, WritesTheUcf101Layout) {
  DatagenOptions o = Tiny();
  o.class_names = {"Grow", "MoveLeft", "RotateClockwise"};
  o.videos_per_class = 4;
  o.train_fraction = 0.5;
  MemoryStore store;
  auto report = GenerateDataset(store, "synth/", o, 2);
  ASSERT_OK(report);

  EXPECT_EQ(report->classes,
            (std::vector<Motion>{Motion::kGrow, Motion::kMoveLeft, Motion::kRotateClockwise}));
  ASSERT_EQ(report->videos.size(), 12u);
  EXPECT_EQ(report->num_train, 6);
  EXPECT_EQ(report->num_test, 6);
  auto contents = Contents(store);
  EXPECT_EQ(contents.size(), 15u);
  EXPECT_EQ(contents["synth/classInd.txt"], "1 Grow\n2 MoveLeft\n3 RotateClockwise\n");
  EXPECT_EQ(
      contents["synth/trainlist01.txt"],
      "Grow/Grow_00000.mp4 1\nGrow/Grow_00001.mp4 1\n"
      "MoveLeft/MoveLeft_00000.mp4 2\nMoveLeft/MoveLeft_00001.mp4 2\n"
      "RotateClockwise/RotateClockwise_00000.mp4 3\nRotateClockwise/RotateClockwise_00001.mp4 3\n");
  EXPECT_EQ(
      contents["synth/testlist01.txt"],
      "Grow/Grow_00002.mp4\nGrow/Grow_00003.mp4\n"
      "MoveLeft/MoveLeft_00002.mp4\nMoveLeft/MoveLeft_00003.mp4\n"
      "RotateClockwise/RotateClockwise_00002.mp4\nRotateClockwise/RotateClockwise_00003.mp4\n");
  uint64_t frames = 0, bytes = 0;
  for (const auto& v : report->videos) {
    ASSERT_TRUE(contents.count(v.key)) << v.key;
    EXPECT_EQ(v.key, "synth/" + v.relative_path);
    EXPECT_EQ(contents[v.key].size(), v.bytes);
    EXPECT_EQ(v.num_frames, SampleClip(o.seed, v.motion, v.index, o).num_frames);
    EXPECT_EQ(contents[v.key].substr(4, 4), "ftyp") << "not an MP4: " << v.key;
    frames += static_cast<uint64_t>(v.num_frames);
    bytes += v.bytes;
  }
  EXPECT_EQ(report->total_frames, frames);
  EXPECT_EQ(report->total_bytes, bytes);
  EXPECT_GT(report->seconds, 0);

  // No prefix: the dataset sits at the store's root.
  MemoryStore root;
  o.class_names = {"Shrink"};
  o.videos_per_class = 1;
  o.train_fraction = 1.0;
  ASSERT_OK(GenerateDataset(root, "", o, 1));
  auto root_contents = Contents(root);
  EXPECT_EQ(root_contents.size(), 4u);
  EXPECT_TRUE(root_contents.count("Shrink/Shrink_00000.mp4"));
  EXPECT_EQ(root_contents["classInd.txt"], "1 Shrink\n");
  EXPECT_EQ(root_contents["trainlist01.txt"], "Shrink/Shrink_00000.mp4 1\n");
  EXPECT_EQ(root_contents["testlist01.txt"], "");
}

TEST(GenerateTest, SameBytesWithOneOrTwoThreadsOtherSeedOtherBytes) {
  DatagenOptions o = Tiny();  // all 8 classes x 2
  MemoryStore one, two, reseeded;
  ASSERT_OK(GenerateDataset(one, "d", o, 1));
  ASSERT_OK(GenerateDataset(two, "d", o, 2));
  o.seed += 1;
  ASSERT_OK(GenerateDataset(reseeded, "d", o, 2));
  auto a = Contents(one), b = Contents(two), c = Contents(reseeded);
  ASSERT_EQ(a.size(), 8u * 2 + 3);
  ASSERT_EQ(b.size(), a.size());
  std::string differing;
  for (const auto& [key, data] : a) {
    if (b[key] != data) differing += " " + key;
  }
  // Rendering is exact (ClipTest checks it), so a difference here is the encoder's: libx264
  // must give the same bytes for the same frames whatever ran before it in the process.
  EXPECT_EQ(differing, "") << "these objects differ between 1 and 2 threads";
  ASSERT_EQ(c.size(), a.size());
  int same = 0;
  for (const auto& [key, data] : a) {
    if (key.size() > 4 && key.substr(key.size() - 4) == ".mp4") same += c[key] == data;
  }
  EXPECT_EQ(same, 0) << "another seed gave identical videos";
}

// Runs a shell command and returns its standard output (and whether it exited 0).
bool RunCommand(const std::string& command, std::string* out) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return false;
  out->clear();
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out->append(buffer, n);
  return ::pclose(pipe) == 0;
}

TEST(GenerateTest, VideosAreH264WithTheExpectedFramesAndPixels) {
  storage::testing::TempDir dir;
  auto store = storage::LocalStore::Open(dir.path());
  ASSERT_OK(store);
  DatagenOptions o = Tiny();
  o.width = 64;
  o.height = 48;
  o.num_classes = 8;
  o.videos_per_class = 1;
  o.fps = 30;
  o.noise = 0;  // so that decoded pixels can be compared with rendered ones
  o.crf = 12;
  auto report = GenerateDataset(**store, "ds", o, 2);
  ASSERT_OK(report);
  for (const auto& v : report->videos) {
    const std::string path = dir.path() + "/" + v.key;
    auto info = media::Probe(media::Input::File(path));
    ASSERT_OK(info);
    EXPECT_EQ(info->codec, "h264") << v.key;
    EXPECT_EQ(info->width, 64);
    EXPECT_EQ(info->height, 48);
    EXPECT_EQ(info->frame_count, v.num_frames) << v.key;
    EXPECT_NEAR(info->frame_rate.value(), 30.0, 1e-6);
    EXPECT_NEAR(info->duration_s, v.num_frames / 30.0, 1e-3);
  }

  // An independent check with FFmpeg's command-line tools: the decoded frames are the rendered
  // ones (colours in the right order, rows not flipped), up to compression.
  const DatagenVideo& v = report->videos[4];  // RotateClockwise
  const std::string path = dir.path() + "/" + v.key;
  std::string out;
  ASSERT_TRUE(
      RunCommand("ffprobe -v error -select_streams v:0 -count_frames -show_entries "
                 "stream=codec_name,nb_read_frames -of csv=p=0 '" +
                     path + "'",
                 &out));
  EXPECT_EQ(out, "h264," + std::to_string(v.num_frames) + "\n");
  ASSERT_TRUE(RunCommand("ffmpeg -v error -i '" + path + "' -f rawvideo -pix_fmt rgb24 -", &out));
  const auto frames = RenderClip(SampleClip(o.seed, v.motion, v.index, o));
  ASSERT_EQ(out.size(), frames.size() * 64 * 48 * 3);
  for (size_t t = 0; t < frames.size(); ++t) {
    double error = 0;
    for (size_t i = 0; i < frames[t].data.size(); ++i) {
      error += std::abs(int(uint8_t(out[t * frames[t].data.size() + i])) - int(frames[t].data[i]));
    }
    error /= frames[t].data.size();
    EXPECT_LT(error, 4.0) << "frame " << t << ": mean absolute error " << error;
  }
}

// A store whose Put fails for keys containing `poison`.
class FailingStore : public MemoryStore {
 public:
  explicit FailingStore(std::string poison) : poison_(std::move(poison)) {}
  Status Put(std::string_view key, std::string_view data) override {
    if (key.find(poison_) != std::string_view::npos) {
      return ResourceExhaustedError("disk full (test)");
    }
    return MemoryStore::Put(key, data);
  }

 private:
  std::string poison_;
};

TEST(GenerateTest, Errors) {
  MemoryStore store;
  DatagenOptions o = Tiny();
  o.num_classes = 0;
  EXPECT_STATUS(GenerateDataset(store, "", o, 1), StatusCode::kInvalidArgument);
  o = Tiny();
  EXPECT_STATUS(GenerateDataset(store, "../up", o, 1), StatusCode::kInvalidArgument);
  EXPECT_STATUS(GenerateDataset(store, "/abs", o, 1), StatusCode::kInvalidArgument);
  EXPECT_STATUS(GenerateDataset(store, "d", o, -1), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contents(store).empty());

  // A failed Put: its error, naming the video, and no lists (the dataset is incomplete).
  FailingStore failing("MoveUp_00001");
  auto report = GenerateDataset(failing, "d", o, 2);
  ASSERT_STATUS(report, StatusCode::kResourceExhausted);
  EXPECT_NE(report.status().message().find("d/MoveUp/MoveUp_00001.mp4"), std::string::npos)
      << report.status().message();
  auto left = Contents(failing);
  EXPECT_FALSE(left.count("d/classInd.txt"));
  EXPECT_FALSE(left.count("d/trainlist01.txt"));
  EXPECT_FALSE(left.count("d/testlist01.txt"));
}

}  // namespace
}  // namespace reel::datagen
