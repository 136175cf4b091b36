// ingest_bench: `reel ingest` throughput on one input set (datagen videos plus the real clips in
// testdata/videos) beside
//   (a) the limit: the ffmpeg command line decoding the same files to null, with the same number
//       of threads (one ffmpeg per video, `threads` of them at a time, 1 decoder thread each);
//   (b) the naive pipeline: ffmpeg cutting clips, then OpenCV dumping every frame as JPEG
//       (bench/naive_ingest.py, `threads` processes);
// and the stored bytes per clip of each mode.
//
//   ingest_bench [--threads N] [--per-class N] [--clip-frames N] [--short-side N] [--keep DIR]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "datagen/datagen.h"
#include "dataset/manifest.h"
#include "ingest/pipeline.h"
#include "storage/local_store.h"
#include "testing/shell.h"

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Run(const std::string& command) { return reel::testing::RunCommand(command).output; }

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "ingest_bench: %s\n", message.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, per_class = 12, clip_frames = 16, short_side = 112;
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--threads")
      threads = std::stoi(value());
    else if (a == "--per-class")
      per_class = std::stoi(value());
    else if (a == "--clip-frames")
      clip_frames = std::stoi(value());
    else if (a == "--short-side")
      short_side = std::stoi(value());
    else if (a == "--keep")
      keep = value();
    else
      Die("usage: ingest_bench [--threads N] [--per-class N] [--clip-frames N] [--short-side N] "
          "[--keep DIR]");
  }
  const char* source_dir = std::getenv("REEL_SOURCE_DIR");
  std::string repo = source_dir ? source_dir : ".";
  std::string shared = repo + "/testdata/videos";
  std::string work = keep.empty() ? "/tmp/reel-ingest-bench-" + std::to_string(::getpid()) : keep;
  std::string input = work + "/input";

  // The input set: synthetic action videos and every real clip, listed in a CSV manifest.
  auto store = reel::storage::LocalStore::Open(input);
  if (!store.ok()) Die(store.status().ToString());
  reel::datagen::DatagenOptions dg;
  dg.videos_per_class = per_class;
  dg.width = 160;
  dg.height = 120;
  dg.show_progress = false;
  auto generated = reel::datagen::GenerateDataset(**store, "synthetic", dg, threads);
  if (!generated.ok()) Die(generated.status().ToString());
  std::string manifest = "path,label\n";
  std::vector<std::string> files;
  for (const auto& video : generated->videos) {
    manifest += video.key + "," +
                std::string(reel::datagen::MotionName(generated->classes[video.class_index - 1])) +
                "\n";
    files.push_back(input + "/" + video.key);
  }
  int real = 0;
  for (const std::string& name : SplitLines(Run("ls '" + shared + "'"))) {
    if (name.empty()) continue;
    Run("mkdir -p '" + input + "/real' && cp '" + shared + "/" + name + "' '" + input + "/real/'");
    manifest += "real/" + name + ",real\n";
    files.push_back(input + "/real/" + name);
    ++real;
  }
  if (!(*store)->Put("list.csv", manifest).ok()) Die("cannot write the manifest");
  std::string file_args;
  for (const auto& f : files) file_args += " '" + f + "'";
  int64_t frames = 0;
  for (const auto& f : files) {
    std::string count =
        Run("ffprobe -v error -select_streams v:0 -count_packets -show_entries "
            "stream=nb_read_packets -of csv=p=0 '" +
            f + "' 2>/dev/null");
    frames += std::atoll(count.c_str());
  }
  std::printf(
      "input: %zu videos (%zu synthetic %dx%d, %d real clips), %lld frames; %d threads; "
      "clips of %d frames, short side %d\n\n",
      files.size(), generated->videos.size(), dg.width, dg.height, real,
      static_cast<long long>(frames), threads, clip_frames, short_side);

  // (a) The limit: decode everything to null.
  auto start = Clock::now();
  Run("printf '%s\\n'" + file_args + " | xargs -P " + std::to_string(threads) +
      " -I{} ffmpeg -v quiet -threads 1 -i {} -f null - ");
  double ffmpeg_s = Since(start);
  double n = static_cast<double>(files.size());
  std::printf("%-44s %7.1f videos/s %9.1f frames/s\n", "ffmpeg -f null (decode only, the limit)",
              n / ffmpeg_s, frames / ffmpeg_s);

  // Reel, both modes.
  double video_clips_s = 0;
  for (auto mode : {reel::dataset::DatasetMode::kVideo, reel::dataset::DatasetMode::kFrames}) {
    reel::ingest::IngestOptions o;
    o.source = input + "/list.csv";
    o.output = work + "/reel-" + std::string(reel::dataset::DatasetModeName(mode));
    o.encode.mode = mode;
    o.clip.clip_frames = clip_frames;
    o.clip.short_side = short_side;
    o.workers = threads;
    o.progress = false;
    start = Clock::now();
    auto report = reel::ingest::RunIngest(o);
    double s = Since(start);
    if (!report.ok()) Die(report.status().ToString());
    auto out = reel::storage::LocalStore::Open(o.output);
    auto m = reel::dataset::Manifest::Read(**out, "");
    if (!m.ok()) Die(m.status().ToString());
    uint64_t bytes = 0, records = 0;
    for (const auto& [split, info] : m->splits) {
      bytes += info.bytes;
      records += info.records;
    }
    double clips_s = records / s;
    if (mode == reel::dataset::DatasetMode::kVideo) video_clips_s = clips_s;
    char what[64];
    std::snprintf(what, sizeof what, "reel ingest --mode %s",
                  std::string(reel::dataset::DatasetModeName(mode)).c_str());
    std::printf(
        "%-44s %7.1f videos/s %9.1f frames/s %7.1f clips/s   %.2fx the limit   %7.1f KiB/clip  "
        "(%zu skipped)\n",
        what, n / s, frames / s, clips_s, ffmpeg_s / s,
        bytes / 1024.0 / std::max<uint64_t>(1, records), report->failed.size());
  }

  // (b) The naive pipeline.
  char clip_seconds[32];
  std::snprintf(clip_seconds, sizeof clip_seconds, "%.4f",
                clip_frames / static_cast<double>(dg.fps));
  for (const char* reader : {"cv2", "av"}) {
    start = Clock::now();
    std::string line =
        Run("/usr/bin/python3 '" + repo + "/bench/naive_ingest.py' '" + work + "/naive-" + reader +
            "' " + clip_seconds + " " + std::to_string(short_side) + " " + std::to_string(threads) +
            " " + reader + file_args + " 2>/dev/null");
    double s = Since(start);
    long ok = 0, clips = 0, bytes = 0;
    if (std::sscanf(line.c_str(), "%ld %ld %ld", &ok, &clips, &bytes) != 3) {
      std::printf("naive pipeline (%s) failed: %s\n", reader, line.c_str());
      continue;
    }
    char what[96];
    std::snprintf(what, sizeof what, "naive: ffmpeg segment + %s JPEG dump", reader);
    std::printf(
        "%-44s %7.1f videos/s %9.1f clips/s   reel video mode is %.1fx faster   %7.1f KiB/clip\n",
        what, n / s, clips / s, video_clips_s / (clips / s), bytes / 1024.0 / std::max(1L, clips));
  }
  if (keep.empty()) Run("rm -rf '" + work + "'");
  return 0;
}
