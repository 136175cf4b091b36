// reel datagen — synthesise a labelled action dataset (moving, rotating, growing and shrinking
// shapes over noisy textures) as H.264 MP4 files in UCF101's layout on any store: the demo's
// input, and a dataset whose classes no single frame can tell apart (see src/datagen/datagen.h).
#include <cstdio>
#include <string>
#include <vector>

#include "apps/reel/commands.h"
#include "base/progress.h"
#include "datagen/datagen.h"
#include "storage/open.h"

namespace reel::cli {
namespace {

struct DatagenCliOptions {
  std::string out;
  std::string size;  // "WxH"; overrides --width/--height
  std::string polarity = "bright-on-dark";
  int threads = 0;
  bool quiet = false;
  datagen::DatagenOptions gen;
};

Status ParseSize(const std::string& text, int* width, int* height) {
  int w = 0, h = 0;
  char x = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &w, &x, &h, &extra) != 3 || (x != 'x' && x != 'X')) {
    return InvalidArgumentError("--size '" + text + "': expected WIDTHxHEIGHT, e.g. 128x128");
  }
  *width = w;
  *height = h;
  return Status::Ok();
}

Status RunDatagen(DatagenCliOptions& o) {
  if (!o.size.empty()) REEL_RETURN_IF_ERROR(ParseSize(o.size, &o.gen.width, &o.gen.height));
  auto polarity = datagen::PolarityFromName(o.polarity);
  if (!polarity)
    return InvalidArgumentError("--polarity '" + o.polarity + "': expected bright-on-dark or any");
  o.gen.polarity = *polarity;
  o.gen.show_progress = !o.quiet;
  REEL_RETURN_IF_ERROR(datagen::ValidateOptions(o.gen));
  REEL_ASSIGN_OR_RETURN(auto store, storage::OpenStore(o.out));
  REEL_ASSIGN_OR_RETURN(datagen::DatagenReport report,
                        datagen::GenerateDataset(*store, "", o.gen, o.threads));
  if (!o.quiet) {
    std::string names;
    for (auto motion : report.classes) {
      names += (names.empty() ? "" : " ") + std::string(datagen::MotionName(motion));
    }
    std::printf("classes    %zu: %s\n", report.classes.size(), names.c_str());
    std::printf("videos     %zu (%d train, %d test), %llu frames of %dx%d at %d fps\n",
                report.videos.size(), report.num_train, report.num_test,
                static_cast<unsigned long long>(report.total_frames), o.gen.width, o.gen.height,
                o.gen.fps);
    std::printf("written    %s to %s in %.1f s (%.1f videos/s)\n",
                Progress::FormatBytes(static_cast<double>(report.total_bytes)).c_str(),
                store->uri().c_str(), report.seconds,
                report.seconds > 0 ? report.videos.size() / report.seconds : 0.0);
  }
  return Status::Ok();
}

}  // namespace

void RegisterDatagen(CLI::App& app, int* exit_code) {
  static DatagenCliOptions options;
  auto& g = options.gen;
  CLI::App* cmd = app.add_subcommand(
      "datagen", "synthesise a labelled action dataset (UCF101 layout, H.264 MP4) on a store");
  cmd->add_option("--out", options.out,
                  "store URI to write into (local path, file://, s3://, mem://)")
      ->required();
  cmd->add_option("--classes", g.num_classes, "number of classes (the first N motions)")
      ->check(CLI::Range(1, datagen::kNumMotions))
      ->capture_default_str();
  cmd->add_option("--class-names", g.class_names,
                  "explicit classes, e.g. MoveLeft,Grow (overrides --classes)")
      ->delimiter(',');
  cmd->add_option("--per-class", g.videos_per_class, "videos per class")
      ->check(CLI::Range(1, 99999))
      ->capture_default_str();
  cmd->add_option("--train-fraction", g.train_fraction,
                  "fraction of each class listed in trainlist01.txt (the rest: testlist01.txt)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--size", options.size, "frame size WIDTHxHEIGHT (overrides --width/--height)");
  cmd->add_option("--width", g.width, "frame width")
      ->check(CLI::Range(16, 4096))
      ->capture_default_str();
  cmd->add_option("--height", g.height, "frame height")
      ->check(CLI::Range(16, 4096))
      ->capture_default_str();
  cmd->add_option("--fps", g.fps, "frame rate")->check(CLI::Range(1, 240))->capture_default_str();
  cmd->add_option("--min-frames", g.min_frames, "shortest video, frames")
      ->check(CLI::Range(2, 100000))
      ->capture_default_str();
  cmd->add_option("--max-frames", g.max_frames, "longest video, frames")
      ->check(CLI::Range(2, 100000))
      ->capture_default_str();
  cmd->add_option("--seed", g.seed, "random seed: the same seed gives the same bytes")
      ->capture_default_str();
  cmd->add_option("--noise", g.noise, "per-frame noise amplitude, levels")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_option(
         "--polarity", options.polarity,
         "bright-on-dark (shape brighter than background in every channel) or any (harder)")
      ->capture_default_str();
  cmd->add_option("--crf", g.crf, "H.264 quality, 0 (lossless) .. 51")
      ->check(CLI::Range(0, 51))
      ->capture_default_str();
  cmd->add_option("--gop", g.gop, "keyframe interval in frames (0: libx264's default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--threads", options.threads, "worker threads (0: one per core)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", options.quiet, "no progress bar or summary");
  cmd->callback([exit_code] {
    Status status = RunDatagen(options);
    if (!status.ok()) *exit_code = Fail("reel datagen", status);
  });
}

}  // namespace reel::cli
