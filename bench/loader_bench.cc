// loader_bench: clips/s of the Reel loader over the same synthetic videos in both dataset modes,
// beside (a) a PyTorch DataLoader decoding the raw videos with PyAV / torchvision
// (bench/torch_loader_peer.py, the same number of workers and clip settings) and (b) the pure
// decode limit on the same shards (every payload decoded, nothing else, the same threads).
//
//   loader_bench [--threads N] [--per-class N] [--batch N] [--epochs N]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

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

// Decodes every record of the split once with `threads` threads; returns records/s.
double DecodeLimit(reel::storage::ObjectStore& store, int threads) {
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
          reel::media::DecodeOptions o;
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

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, per_class = 12, batch = 8, epochs = 2;
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
    else
      Die("usage: loader_bench [--threads N] [--per-class N] [--batch N] [--epochs N]");
  }
  const char* source = std::getenv("REEL_SOURCE_DIR");
  std::string repo = source ? source : ".";
  std::string work = "/tmp/reel-loader-bench-" + std::to_string(::getpid());
  const int frames = 8, stride = 2, size = 112;

  auto raw = reel::storage::LocalStore::Open(work + "/raw");
  if (!raw.ok()) Die(raw.status().ToString());
  reel::datagen::DatagenOptions dg;
  dg.videos_per_class = per_class;
  dg.width = 171;
  dg.height = 128;
  dg.min_frames = 32;
  dg.max_frames = 48;
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
      "input: %d training videos %dx%d, 32-48 frames; clips of %d frames (stride %d) at %dx%d, "
      "batch %d, %d threads/workers\n\n",
      train_videos, dg.width, dg.height, frames, stride, size, size, batch, threads);

  // The peer: PyTorch DataLoader over the raw videos (one clip per video per epoch).
  double peer_clips_s = 0;
  {
    std::string line =
        Run("/usr/bin/python3 '" + repo + "/bench/torch_loader_peer.py' " +
            std::to_string(threads) + " " + std::to_string(batch) + " " + std::to_string(frames) +
            " " + std::to_string(stride) + " " + std::to_string(size) + files + " 2>/dev/null");
    double clips = 0, seconds = 0;
    if (std::sscanf(line.c_str(), "%lf %lf", &clips, &seconds) == 2 && seconds > 0) {
      peer_clips_s = clips / seconds;
      std::printf("%-46s %8.1f clips/s\n", "PyTorch DataLoader + PyAV/torchvision (raw)",
                  peer_clips_s);
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
    io.clip.clip_frames = 16;
    io.clip.short_side = 128;
    io.workers = threads;
    io.progress = false;
    auto report = reel::ingest::RunIngest(io);
    if (!report.ok()) Die(report.status().ToString());
    auto store = reel::storage::LocalStore::Open(io.output);
    double limit = DecodeLimit(**store, threads);

    reel::loader::LoaderOptions lo;
    lo.batch_size = batch;
    lo.clip.frames = frames;
    lo.clip.stride = stride;
    lo.transform.size = size;
    lo.threads = threads;
    lo.prefetch_batches = 4;
    auto loader = reel::loader::Loader::Open(**store, lo);
    if (!loader.ok()) Die(loader.status().ToString());
    uint64_t clips = 0;
    auto start = Clock::now();
    for (int e = 0; e < epochs; ++e) {
      if (!(*loader)->Start({lo.plan.seed, e, 0}).ok()) Die("start");
      while (true) {
        auto b = (*loader)->Next();
        if (!b.ok()) Die(b.status().ToString());
        if (!b->has_value()) break;
        clips += static_cast<uint64_t>((*b)->shape[0]);
      }
    }
    double s = Since(start);
    double clips_s = clips / s;
    std::printf(
        "%-46s %8.1f clips/s   decode limit %8.1f clips/s (%.2fx of it)   %.1fx the PyTorch peer\n",
        ("reel loader, " + name + " mode").c_str(), clips_s, limit, clips_s / limit,
        peer_clips_s > 0 ? clips_s / peer_clips_s : 0.0);
  }
  Run("rm -rf '" + work + "'");
  return 0;
}
