// reel ingest SOURCE OUTPUT — raw videos (UCF101 folders, Kinetics CSV, CSV/JSONL manifest) on
// any store into a sharded Reel dataset on any store. See src/ingest/pipeline.h.
#include <cstdio>
#include <string>

#include "apps/reel/commands.h"
#include "dataset/layout.h"
#include "ingest/pipeline.h"

namespace reel::cli {
namespace {

struct IngestFlags {
  std::string mode = "video";
  double shard_mib = 128;
};

int RunIngestCommand(ingest::IngestOptions options, const IngestFlags& flags) {
  auto mode = dataset::ParseDatasetMode(flags.mode);
  if (!mode.ok()) {
    std::fprintf(stderr, "reel ingest: --mode: %s\n", mode.status().message().c_str());
    return 3;
  }
  if (*mode == dataset::DatasetMode::kFeatures) {
    std::fprintf(stderr,
                 "reel ingest: --mode: features are made by `reel features`, not by an "
                 "ingest (video or frames)\n");
    return 3;
  }
  options.encode.mode = *mode;
  options.shard_bytes = static_cast<uint64_t>(flags.shard_mib * (1 << 20));
  auto report = ingest::RunIngest(options);
  if (!report.ok()) return Fail("reel ingest", report.status());
  if (report->already_complete) {
    std::printf("%s is already complete for these sources and settings; nothing to do\n",
                report->output.c_str());
    return 0;
  }
  std::printf("ingested %lld videos (%lld finished earlier) into %s in %.1f s: ",
              static_cast<long long>(report->videos_ingested),
              static_cast<long long>(report->videos_resumed), report->output.c_str(),
              report->seconds);
  bool first = true;
  for (const auto& [split, clips] : report->clips) {
    std::printf("%s%s %lld clips", first ? "" : ", ", split.c_str(), static_cast<long long>(clips));
    first = false;
  }
  std::printf("\n");
  if (!report->failed.empty() || !report->missing.empty()) {
    std::printf("skipped %zu videos and %zu missing listing entries (see ingest_report.json):\n",
                report->failed.size(), report->missing.size());
    for (const auto& f : report->failed) std::printf("  %s: %s\n", f.key.c_str(), f.reason.c_str());
    for (const auto& m : report->missing)
      std::printf("  %s: %s\n", m.reference.c_str(), m.reason.c_str());
  }
  return 0;
}

}  // namespace

void RegisterIngest(CLI::App& app, int* exit_code) {
  static ingest::IngestOptions options;
  static IngestFlags flags;
  CLI::App* cmd = app.add_subcommand(
      "ingest",
      "turn raw videos (UCF101 folders, Kinetics CSV, CSV/JSONL manifest) into a sharded dataset");
  cmd->add_option("source", options.source,
                  "UCF101 folder, Kinetics .csv or manifest .csv/.jsonl (any store URI)")
      ->required();
  cmd->add_option("output", options.output, "dataset root URI (local path, file://, s3://)")
      ->required();
  cmd->add_option("--name", options.name, "dataset name (default: the output's last segment)");
  cmd->add_option("--mode", flags.mode, "video (H.264 clips) or frames (zstd uint8 frames)")
      ->capture_default_str();
  cmd->add_option("--clip-frames", options.clip.clip_frames, "frames per clip")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("--frame-stride", options.clip.frame_stride, "samples between a clip's frames")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--clip-stride", options.clip.clip_stride,
                  "samples between clip starts (0: clips do not overlap)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->add_option("--fps", options.clip.fps, "resample to this frame rate (0: the source's)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--short-side", options.clip.short_side, "resize so the shorter side is this")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  cmd->add_option("--max-clips", options.clip.max_clips_per_video,
                  "clips per video, spread evenly (0: all)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd->add_option("--shard-mib", flags.shard_mib, "target shard size in MiB")
      ->check(CLI::Range(0.0625, 65536.0))
      ->capture_default_str();
  cmd->add_option("--crf", options.encode.crf, "H.264 quality (video mode)")
      ->check(CLI::Range(0, 51))
      ->capture_default_str();
  cmd->add_option("--preset", options.encode.preset, "x264 preset (video mode)")
      ->capture_default_str();
  cmd->add_option("--zstd-level", options.encode.zstd_level, "zstd level (frames mode)")
      ->check(CLI::Range(-5, 19))
      ->capture_default_str();
  cmd->add_option("--workers", options.workers, "parallel videos (0: one per core)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  cmd->add_option("--shuffle-seed", options.shuffle_seed,
                  "seed of the order videos are written in");
  cmd->add_flag("!--no-shuffle", options.shuffle,
                "write videos in the listing's order (class by class)");
  cmd->add_flag("--overwrite", options.overwrite,
                "replace a complete dataset made from other sources or settings");
  cmd->add_flag("--restart", options.restart,
                "discard an unfinished run made with other sources or settings");
  cmd->callback([exit_code] { *exit_code = RunIngestCommand(options, flags); });
}

}  // namespace reel::cli
