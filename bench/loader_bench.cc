// loader_bench: clips/s of the Reel loader over the same synthetic videos in both dataset modes,
// beside (a) a PyTorch DataLoader decoding the raw videos with PyAV / torchvision
// (bench/torch_loader_peer.py, the same number of workers and clip settings) and (b) the pure
// decode limit on the same shards (every payload decoded to RGB, nothing else, the same threads).
// The settings are the main job's (configs/synthetic.yaml, configs/synthetic-data.sh): 128x128
// videos cut into 8-frame clips (every third frame) at short side 112, clips of 8 frames
// randomly cropped (80-100% of the area) to 112x112, flipped, reversed, normalised.
//
//   loader_bench [--threads N] [--per-class N] [--batch N] [--epochs N] [--rounds N] [--json FILE]
// Each round times `epochs` passes of the decode limit, then `epochs` epochs of the loader; the
// figures are the medians over the rounds.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/allocator.h"
#include "bench/report.h"
#include "datagen/datagen.h"
#include "dataset/frames_codec.h"
#include "dataset/shard_reader.h"
#include "ingest/pipeline.h"
#include "loader/loader.h"
#include "media/decoder.h"
#include "storage/local_store.h"
#include "testing/shell.h"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "loader_bench: %s\n", m.c_str());
  std::exit(1);
}

std::string Run(const std::string& command) { return reel::testing::RunCommand(command).output; }

// Decodes every record of the split `passes` times with `threads` threads; returns records/s.
double DecodeLimit(reel::storage::ObjectStore& store, int threads, int passes) {
  auto shards = reel::dataset::ListShards(store, "", "train");
  if (!shards.ok()) Die(shards.status().ToString());
  std::vector<std::pair<uint32_t, size_t>> work;
  std::vector<std::unique_ptr<reel::dataset::ShardReader>> readers;
  for (uint32_t s : *shards) {
    auto reader = reel::dataset::ShardReader::Open(store, "", "train", s);
    if (!reader.ok()) Die(reader.status().ToString());
    for (size_t i = 0; i < (*reader)->num_records(); ++i)
      work.push_back({static_cast<uint32_t>(readers.size()), i});
    readers.push_back(std::move(*reader));
  }
  const size_t records = work.size();
  for (int p = 1; p < passes; ++p) work.insert(work.end(), work.begin(), work.begin() + records);
  std::atomic<size_t> next{0};
  auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < work.size(); i = next++) {
        auto record = readers[work[i].first]->ReadRecord(work[i].second);
        if (!record.ok()) continue;
        if (record->payload_ext == "frames.zst") {
          (void)reel::dataset::DecodeFrames(record->payload);
        } else {
          const reel::media::DecodeOptions o = reel::media::OwnClipOptions();  // as the loader
          auto decoder = reel::media::VideoDecoder::Open(
              reel::media::Input::View(record->payload, record->key), o);
          if (decoder.ok())
            (void)(*decoder)->ForEachFrame([](reel::media::Frame&&) { return reel::Status::Ok(); });
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return work.size() / Since(start);
}

// Clips/s of `epochs` epochs of the loader.
double LoaderRate(reel::loader::Loader& loader, uint64_t seed, int epochs) {
  uint64_t clips = 0;
  const auto start = Clock::now();
  for (int e = 0; e < epochs; ++e) {
    if (!loader.Start({seed, e, 0}).ok()) Die("start");
    while (true) {
      auto b = loader.Next();
      if (!b.ok()) Die(b.status().ToString());
      if (!b->has_value()) break;
      clips += static_cast<uint64_t>((*b)->shape[0]);
    }
  }
  return clips / Since(start);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string json = reel::bench::TakeJsonFlag(&argc, argv);
  int threads = 2, per_class = 30, batch = 4, epochs = 4, rounds = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> int {
      if (i + 1 >= argc) Die(a + " needs a value");
      return std::atoi(argv[++i]);
    };
    if (a == "--threads")
      threads = value();
    else if (a == "--per-class")
      per_class = value();
    else if (a == "--batch")
      batch = value();
    else if (a == "--epochs")
      epochs = value();
    else if (a == "--rounds")
      rounds = value();
    else
      Die("usage: loader_bench [--threads N] [--per-class N] [--batch N] [--epochs N] "
          "[--rounds N] [--json F]");
  }
  reel::RetainFreedHeapMemory();  // as `reel` (the trainer) does
  const char* source = std::getenv("REEL_SOURCE_DIR");
  std::string repo = source ? source : ".";
  std::string work = "/tmp/reel-loader-bench-" + std::to_string(::getpid());
  const int frames = 8, raw_stride = 3, size = 112;

  auto raw = reel::storage::LocalStore::Open(work + "/raw");
  if (!raw.ok()) Die(raw.status().ToString());
  reel::datagen::DatagenOptions dg;
  dg.videos_per_class = per_class;
  dg.show_progress = false;
  auto generated = reel::datagen::GenerateDataset(**raw, "", dg, threads);
  if (!generated.ok()) Die(generated.status().ToString());
  std::string files;
  int train_videos = 0;
  for (const auto& v : generated->videos) {
    if (!v.train) continue;
    files += " '" + work + "/raw/" + v.key + "'";
    ++train_videos;
  }
  std::printf(
      "input: %d training videos %dx%d, %d-%d frames; clips of %d frames (every %drd of the "
      "video) at %dx%d, batch %d, %d threads/workers, %d rounds of %d epochs\n",
      train_videos, dg.width, dg.height, dg.min_frames, dg.max_frames, frames, raw_stride, size,
      size, batch, threads, rounds, epochs);
  reel::bench::Report report("loader_bench", threads);

  // The peer: PyTorch DataLoader over the raw videos (one clip per video per epoch).
  std::optional<reel::bench::Reference> peer;
  {
    std::string line =
        Run("/usr/bin/python3 '" + repo + "/bench/torch_loader_peer.py' " +
            std::to_string(threads) + " " + std::to_string(batch) + " " + std::to_string(frames) +
            " " + std::to_string(raw_stride) + " " + std::to_string(size) + files + " 2>/dev/null");
    double clips = 0, seconds = 0;
    if (std::sscanf(line.c_str(), "%lf %lf", &clips, &seconds) == 2 && seconds > 0) {
      peer = reel::bench::Reference{clips / seconds, "PyTorch DataLoader + PyAV"};
      report.Add({"PyTorch DataLoader + PyAV/torchvision (raw)", peer->value, "clips/s", {}, {}});
    } else {
      std::printf(
          "PyTorch peer failed (python3-torch, python3-torchvision, python3-av installed?): %s\n",
          line.c_str());
    }
  }

  for (auto mode : {reel::dataset::DatasetMode::kVideo, reel::dataset::DatasetMode::kFrames}) {
    std::string name(reel::dataset::DatasetModeName(mode));
    reel::ingest::IngestOptions io;
    io.source = work + "/raw";
    io.output = work + "/ds-" + name;
    io.encode.mode = mode;
    io.clip.clip_frames = frames;
    io.clip.frame_stride = raw_stride;
    io.clip.clip_stride = 12;
    io.clip.short_side = size;
    io.workers = threads;
    io.progress = false;
    const auto ingest_start = Clock::now();
    auto ingested = reel::ingest::RunIngest(io);
    if (!ingested.ok()) Die(ingested.status().ToString());
    // (The ingest bench has the ingest's limit and peer; this is its rate at the main job's
    // settings, whose clips overlap: a clip starts 12 frames after the last, spans 24.)
    const double ingest_s = Since(ingest_start);
    report.Add({"ingest of the raw videos, " + name + " mode",
                static_cast<double>(generated->videos.size()) / ingest_s,
                "videos/s",
                {},
                {}});
    auto store = reel::storage::LocalStore::Open(io.output);
    reel::loader::LoaderOptions lo;
    lo.batch_size = batch;
    lo.clip.frames = frames;
    lo.clip.stride = 1;
    lo.transform.size = size;
    lo.transform.min_scale = 0.8;
    lo.transform.reverse = true;
    lo.threads = threads;
    lo.prefetch_batches = 4;
    auto loader = reel::loader::Loader::Open(**store, lo);
    if (!loader.ok()) Die(loader.status().ToString());
    // Limit and loader take turns, so that both see the same state of a shared, noisy machine;
    // each figure is the median of the rounds.
    std::vector<double> limits, loaders;
    for (int round = 0; round < rounds; ++round) {
      limits.push_back(DecodeLimit(**store, threads, epochs));
      loaders.push_back(LoaderRate(**loader, lo.plan.seed, epochs));
    }
    const double limit = Median(limits), clips_s = Median(loaders);
    report.Add({"decode limit, " + name + " shards", limit, "clips/s", {}, {}});
    report.Add({"reel loader, " + name + " mode", clips_s, "clips/s",
                reel::bench::Reference{limit, "pure decode of the shards"}, peer});
  }
  Run("rm -rf '" + work + "'");
  return report.Finish(json);
}
