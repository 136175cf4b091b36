// ingest_bench: `reel ingest` throughput on one input set (datagen videos plus the real clips in
// testdata/videos) beside
//   (a) the limit: every frame of the same files decoded with libavcodec and nothing else, in
//       this process, on the same number of threads (one video per thread, 1 decoder thread);
//   (b) the naive pipeline: ffmpeg cutting clips, then OpenCV dumping every frame as JPEG
//       (bench/naive_ingest.py, `threads` processes);
// with where ingest's time goes (open, decode, convert and resize, encode, tar and write: the
// ingest report's stage times) and the stored bytes per clip of each mode.
//
//   ingest_bench [--threads N] [--per-class N] [--clip-frames N] [--short-side N] [--keep DIR]
//                [--json FILE]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include "bench/report.h"
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

// Every frame of the video at `path` through libavcodec (1 thread), nothing done with them: the
// frames decoded, or 0 for a file libavformat cannot open (the broken ones ingest skips too).
int64_t DecodeEveryFrame(const std::string& path) {
  AVFormatContext* format = nullptr;
  if (avformat_open_input(&format, path.c_str(), nullptr, nullptr) < 0) return 0;
  int64_t frames = 0;
  const AVCodec* codec = nullptr;
  AVCodecContext* context = nullptr;
  const int stream = avformat_find_stream_info(format, nullptr) < 0
                         ? -1
                         : av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  if (stream >= 0) context = avcodec_alloc_context3(codec);
  if (context != nullptr &&
      avcodec_parameters_to_context(context, format->streams[stream]->codecpar) >= 0) {
    context->thread_count = 1;
    if (avcodec_open2(context, codec, nullptr) >= 0) {
      AVPacket* packet = av_packet_alloc();
      AVFrame* frame = av_frame_alloc();
      const auto drain = [&] {
        while (avcodec_receive_frame(context, frame) == 0) ++frames;
      };
      while (av_read_frame(format, packet) >= 0) {
        if (packet->stream_index == stream && avcodec_send_packet(context, packet) >= 0) drain();
        av_packet_unref(packet);
      }
      avcodec_send_packet(context, nullptr);
      drain();
      av_frame_free(&frame);
      av_packet_free(&packet);
    }
  }
  avcodec_free_context(&context);
  avformat_close_input(&format);
  return frames;
}

// The limit: every file decoded once, `threads` at a time. Returns (frames, seconds).
std::pair<int64_t, double> DecodeAll(const std::vector<std::string>& files, int threads) {
  std::atomic<size_t> next{0};
  std::atomic<int64_t> frames{0};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < files.size(); i = next++) frames += DecodeEveryFrame(files[i]);
    });
  }
  for (auto& t : pool) t.join();
  return {frames.load(), Since(start)};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string json = reel::bench::TakeJsonFlag(&argc, argv);
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
  av_log_set_level(AV_LOG_QUIET);  // the broken clips are broken on purpose
  auto [frames, decode_s] = DecodeAll(files, threads);
  std::printf(
      "input: %zu videos (%zu synthetic %dx%d, %d real clips), %lld frames; %d threads; "
      "clips of %d frames, short side %d\n\n",
      files.size(), generated->videos.size(), dg.width, dg.height, real,
      static_cast<long long>(frames), threads, clip_frames, short_side);

  // (a) The limit, measured above and again after each ingest run: this VM's speed drifts by
  // 2x over minutes, so each mode is compared with the mean of the limits either side of it.
  reel::bench::Report report("ingest_bench", threads);
  double limit_before = frames / decode_s;

  // (b) The naive pipeline, both readers; the faster is the peer.
  std::optional<reel::bench::Reference> peer;
  char clip_seconds[32];
  std::snprintf(clip_seconds, sizeof clip_seconds, "%.4f",
                clip_frames / static_cast<double>(dg.fps));
  for (const char* reader : {"cv2", "av"}) {
    const auto start = Clock::now();
    std::string line =
        Run("/usr/bin/python3 '" + repo + "/bench/naive_ingest.py' '" + work + "/naive-" + reader +
            "' " + clip_seconds + " " + std::to_string(short_side) + " " + std::to_string(threads) +
            " " + reader + file_args + " 2>/dev/null");
    const double s = Since(start);
    long ok = 0, clips = 0, bytes = 0;
    if (std::sscanf(line.c_str(), "%ld %ld %ld", &ok, &clips, &bytes) != 3) {
      std::printf("naive pipeline (%s) failed: %s\n", reader, line.c_str());
      continue;
    }
    const std::string name = std::string("naive: ffmpeg segment + ") + reader + " JPEG dump";
    std::printf("%-44s %7.1f KiB/clip\n", name.c_str(), bytes / 1024.0 / std::max(1L, clips));
    report.Add({name, clips / s, "clips/s", {}, {}});
    if (!peer || clips / s > peer->value) peer = reel::bench::Reference{clips / s, name};
  }

  // Reel, both modes, with where the time went.
  for (auto mode : {reel::dataset::DatasetMode::kVideo, reel::dataset::DatasetMode::kFrames}) {
    const std::string name(reel::dataset::DatasetModeName(mode));
    reel::ingest::IngestOptions o;
    o.source = input + "/list.csv";
    o.output = work + "/reel-" + name;
    o.encode.mode = mode;
    o.clip.clip_frames = clip_frames;
    o.clip.short_side = short_side;
    o.workers = threads;
    o.progress = false;
    const auto start = Clock::now();
    auto ingested = reel::ingest::RunIngest(o);
    const double s = Since(start);
    if (!ingested.ok()) Die(ingested.status().ToString());
    auto out = reel::storage::LocalStore::Open(o.output);
    auto m = reel::dataset::Manifest::Read(**out, "");
    if (!m.ok()) Die(m.status().ToString());
    uint64_t bytes = 0, records = 0;
    for (const auto& [split, info] : m->splits) {
      bytes += info.bytes;
      records += info.records;
    }
    std::printf("reel ingest --mode %-25s %7.1f KiB/clip (%zu videos skipped)\n", name.c_str(),
                bytes / 1024.0 / std::max<uint64_t>(1, records), ingested->failed.size());
    const auto [again, again_s] = DecodeAll(files, threads);
    const double limit_after = again / again_s;
    const reel::bench::Reference limit{(limit_before + limit_after) / 2, "pure libavcodec decode"};
    limit_before = limit_after;
    report.Add({"libavcodec decoding every frame, around " + name + " mode",
                limit.value,
                "frames/s",
                {},
                {}});
    report.Add({"reel ingest --mode " + name, frames / s, "frames/s", limit, {}});
    report.Add({"reel ingest --mode " + name + ", clips", records / s, "clips/s", {}, peer});
    // Thread-seconds per stage, as shares of what the workers had (threads x wall time).
    const auto& t = ingested->stages;
    const double had = threads * s;
    const std::pair<const char*, double> stages[] = {
        {"open (index, decoder)", t.open_s},
        {"decode (demux, libavcodec)", t.decode_s},
        {"convert (libswscale)", t.convert_s},
        {"encode", t.encode_s},
        {"tar + write (committer)", ingested->write_s}};
    double accounted = 0;
    for (const auto& [stage, seconds] : stages) {
      report.Add({name + " mode: " + stage, seconds / had, "share", {}, {}});
      accounted += seconds;
    }
    report.Add({name + " mode: elsewhere (idle, queues)",
                std::max(0.0, 1 - accounted / had),
                "share",
                {},
                {}});
  }
  if (keep.empty()) Run("rm -rf '" + work + "'");
  return report.Finish(json);
}
